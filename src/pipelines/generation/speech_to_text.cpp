#include "pipelines/generation/speech_to_text.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/elapsed.h"
#include "generate/beam_decode.h"
#include "pipelines/generation/folder_files.h"
#include "pipelines/generation/generative_folder.h"
#include "generate/beam_result.h"

namespace mminfer::pipelines {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::map<std::string, generate::TokenId> token_map(const json& j, const char* key, const fs::path& file) {
  std::map<std::string, generate::TokenId> out;
  if (!j.contains(key)) return out;
  if (!j[key].is_object()) throw Error(file.string() + ": " + key + " must map names to token ids");
  for (const auto& [name, id] : j[key].items()) {
    if (!id.is_number_integer()) throw Error(file.string() + ": " + key + "." + name + " must be a token id");
    out[name] = id.get<generate::TokenId>();
  }
  return out;
}

// Whisper's layout: <|0.00|> right after <|notimestamps|>, then one token per 0.02 s to <|30.00|>.
std::optional<generate::TimestampRules> timestamp_rules(const text::Tokenizer& tokenizer, const json& gen,
                                                        std::optional<generate::TokenId> no_timestamps,
                                                        const std::vector<generate::TokenId>& eos, const fs::path& gen_file) {
  if (!no_timestamps || eos.empty()) return std::nullopt;
  const generate::TokenId begin = *no_timestamps + 1, last = begin + 1500;
  if (tokenizer.token_to_id("<|0.00|>") != begin || tokenizer.token_to_id("<|30.00|>") != last || last >= tokenizer.vocab_end())
    return std::nullopt;
  generate::TimestampRules rules;
  rules.eot = eos.front();
  rules.no_timestamps = *no_timestamps;
  rules.timestamp_begin = begin;
  if (gen.contains("max_initial_timestamp_index")) {
    const json& v = gen["max_initial_timestamp_index"];
    if (v.is_null()) rules.max_initial_index.reset();
    else if (v.is_number_integer() && v.get<int64_t>() >= 0) rules.max_initial_index = v.get<size_t>();
    else throw Error(gen_file.string() + ": max_initial_timestamp_index must be an integer >= 0 or null");
  }
  return rules;
}

}  // namespace

SpeechToText::SpeechToText(const fs::path& dir, const SessionOptions& options, DType kv_cache) : dir_(dir) {
  if (!fs::is_directory(dir)) throw Error(dir.string() + ": not a folder");
  require_generative_kind(dir, GenerativeKind::kSpeechToText);
  EncoderDecoderFiles files = find_encoder_decoder_files(dir);
  tokenizer_ = load_tokenizer(dir);
  json config = read_json_object(dir / "config.json", true);
  json pre = read_json_object(dir / "preprocessor_config.json", false);
  json gen = read_json_object(dir / "generation_config.json", false);

  audio::LogMelOptions mel;
  fs::path pre_file = dir / "preprocessor_config.json";
  mel.n_mels = static_cast<int>(positive_int(pre, "feature_size", positive_int(config, "num_mel_bins", 80, dir / "config.json"), pre_file));
  mel.sample_rate = static_cast<int>(positive_int(pre, "sampling_rate", 16000, pre_file));
  mel.hop = static_cast<int>(positive_int(pre, "hop_length", 160, pre_file));
  mel.n_fft = static_cast<int>(positive_int(pre, "n_fft", 400, pre_file));
  mel.fmax = mel.sample_rate / 2.0;
  window_samples_ = positive_int(pre, "n_samples", positive_int(pre, "chunk_length", 30, pre_file) * mel.sample_rate, pre_file);
  mel.pad_or_trim = window_samples_;
  logmel_ = std::make_unique<audio::LogMel>(mel);
  context_ = positive_int(config, "max_target_positions", 448, dir / "config.json");

  config_ = read_generation_settings(dir);
  fs::path gen_file = dir / "generation_config.json";
  languages_ = token_map(gen, "lang_to_id", gen_file);
  tasks_ = token_map(gen, "task_to_id", gen_file);
  if (gen.contains("no_timestamps_token_id") && gen["no_timestamps_token_id"].is_number_integer())
    no_timestamps_ = gen["no_timestamps_token_id"].get<generate::TokenId>();
  timestamp_rules_ = timestamp_rules(*tokenizer_, gen, no_timestamps_, config_.eos_token_ids, gen_file);
  if (!config_.decoder_start_token_id) throw Error(dir.string() + ": no decoder_start_token_id in config.json or generation_config.json");
  start_ = *config_.decoder_start_token_id;
  for (const auto& [index, id] : config_.forced_decoder_ids) {
    for (const auto& [name, lang] : languages_)
      if (lang == id) forced_language_ = id;
    for (const auto& [name, task] : tasks_)
      if (task == id) forced_task_ = id;
  }
  config_.forced_decoder_ids.clear();  // the prompt carries them

  Status s = Session::load(files.encoder, options, &encoder_);
  if (!s) throw Error(files.encoder + ": " + s.message());
  cached_.set_identity(model_identity(files.encoder));
  decoder_ = std::make_unique<generate::EncoderDecoderModel>(files.first_decoder, files.with_past_decoder, options,
                                                                 kv_cache);
}

void SpeechToText::require_timestamps() const {
  if (!timestamp_rules_)
    throw Error(dir_.string() + " has no timestamp tokens: timestamps need <|0.00|>..<|30.00|> right after "
                "<|notimestamps|> (no_timestamps_token_id) in tokenizer.json");
}

std::vector<generate::TokenId> SpeechToText::prompt(const std::string& language, const std::string& task,
                                                    bool timestamps) const {
  std::vector<generate::TokenId> ids = {start_};
  if (!languages_.empty()) ids.push_back(languages_.at(language));
  if (!tasks_.empty()) {
    auto it = tasks_.find(task);
    if (it == tasks_.end()) throw Error("unknown task '" + task + "' (the model knows transcribe and translate)");
    ids.push_back(it->second);
  }
  if (no_timestamps_ && !timestamps) ids.push_back(*no_timestamps_);
  return ids;
}

// The language token the first step of the first window likes best, as Whisper detects it.
std::string SpeechToText::detect_language(size_t rows) {
  decoder_->start(static_cast<int64_t>(rows), 4);
  Tensor logits = decoder_->prefill(0, {start_});
  std::string best;
  float best_logit = -INFINITY;
  for (const auto& [name, id] : languages_)
    if (id >= 0 && id < logits.dim(1) && logits.data<float>()[id] > best_logit) best_logit = logits.data<float>()[id], best = name;
  if (best.empty()) throw Error("cannot detect the language: lang_to_id names no token of the vocabulary");
  return best;
}

std::span<const float> SpeechToText::window(const std::vector<float>& samples, size_t begin) const {
  begin = std::min(begin, samples.size());
  size_t end = std::min(samples.size(), begin + static_cast<size_t>(window_samples_));
  return std::span<const float>(samples.data() + begin, end - begin);
}

Tensor SpeechToText::features(const std::vector<float>& samples, const std::vector<size_t>& begins) const {
  const int64_t frames = logmel_->frames(window_samples_), mels = logmel_->options().n_mels;
  Tensor batch = Tensor::empty(DType::kFloat32, {static_cast<int64_t>(begins.size()), mels, frames});
  for (size_t k = 0; k < begins.size(); ++k) {
    Tensor f = logmel_->compute(window(samples, begins[k]));
    std::memcpy(batch.data<float>() + k * mels * frames, f.raw(), f.nbytes());
  }
  return batch;
}

std::vector<generate::DecodedSequence> SpeechToText::decode_windows(const std::vector<float>& samples,
                                                                    const std::vector<size_t>& begins,
                                                                    std::string& language, const std::string& task,
                                                                    const TranscribeOptions& options, Transcript& out) {
  const size_t count = begins.size();
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> digests;
  for (size_t begin : begins) digests.push_back(content_digest(window(samples, begin)));
  std::vector<Tensor> rows = cached_.rows("audio", digests, [&](const std::vector<size_t>& items) {
    std::vector<size_t> missing;
    for (size_t i : items) missing.push_back(begins[i]);
    std::vector<Tensor> states;
    Status s = encoder_->run({{"input_features", features(samples, missing)}}, &states);
    if (!s) throw Error(s.message());
    if (states.empty()) throw Error("the encoder gave no output");
    return states[0];
  });
  Tensor states = stack_rows(rows);
  out.encoder_ms += ms_since(t0);
  if (language.empty() && !languages_.empty()) {
    decoder_->set_encoder_states(states);
    language = detect_language(count);
  }
  generate::DecodeRequest request;
  request.config = config_;
  if (options.beams) request.config.num_beams = options.beams;
  request.config.num_return_sequences = 1;
  if (options.max_new_tokens) request.config.max_new_tokens = options.max_new_tokens;
  request.context = context_;
  if (options.timestamps) request.config.timestamps = timestamp_rules_;
  request.prompts.assign(count, prompt(language, task, options.timestamps));
  generate::DecodeTimings t;
  decoder_->set_encoder_states(states, static_cast<int64_t>(std::max<size_t>(1, request.config.num_beams)));
  const generate::DecodeFn detokenize = detokenizer(*tokenizer_);
  std::vector<generate::DecodedSequence> decoded;
  if (request.config.num_beams > 1) {
    for (const auto& best : generate::beam_decode(*decoder_, request, &t))
      decoded.push_back(generate::best_sequence(best, request.config, detokenize));
  } else {
    decoded = generate::decode(*decoder_, request, detokenize, &t);
  }
  out.timings.add(t);
  for (const auto& d : decoded) out.tokens.insert(out.tokens.end(), d.tokens.begin(), d.tokens.end());
  return decoded;
}

Transcript SpeechToText::transcribe(const std::vector<float>& samples, const TranscribeOptions& options) {
  if (samples.empty()) throw Error("the audio holds no samples");
  if (options.timestamps) require_timestamps();
  std::string language = options.language;
  if (!language.empty() && language.front() != '<') language = "<|" + language + "|>";
  if (!language.empty() && !languages_.count(language)) {
    if (languages_.empty()) throw Error("this model is not multilingual: it takes no --language");
    std::string known;
    for (const auto& [name, id] : languages_) known += (known.empty() ? "" : ", ") + name;
    throw Error("unknown language '" + options.language + "' (the model knows " + known + ")");
  }
  if (language.empty() && forced_language_)
    for (const auto& [name, id] : languages_)
      if (id == *forced_language_) language = name;
  std::string task = options.task.empty() ? "transcribe" : options.task;
  if (forced_task_ && options.task.empty())
    for (const auto& [name, id] : tasks_)
      if (id == *forced_task_) task = name;

  Transcript out;
  const size_t span = static_cast<size_t>(window_samples_);
  const generate::DecodeFn detokenize = detokenizer(*tokenizer_);
  if (!options.timestamps) {
    // Fixed cuts, decoded together in batches.
    const size_t windows = (samples.size() + span - 1) / span;
    out.windows = windows;
    const size_t per_batch = std::max<size_t>(1, options.windows_per_batch);
    for (size_t first = 0; first < windows; first += per_batch) {
      std::vector<size_t> begins;
      for (size_t w = first; w < std::min(windows, first + per_batch); ++w) begins.push_back(w * span);
      for (const auto& d : decode_windows(samples, begins, language, task, options, out)) out.text += d.text;
    }
  } else {
    // One window after another, each from where the last one's complete segments ended.
    const generate::TokenId begin = timestamp_rules_->timestamp_begin;
    const double rate = sample_rate();
    for (size_t seek = 0; seek < samples.size();) {
      const generate::DecodedSequence d = decode_windows(samples, {seek}, language, task, options, out).front();
      const WindowCut cut = window_cut(d.tokens, begin, timestamp_rules_->eot);
      const std::span<const generate::TokenId> kept(d.tokens.data(), cut.kept);
      // The text leaves the timestamps out (Whisper's tokenizer.json does not mark them special).
      std::vector<generate::TokenId> words;
      for (generate::TokenId t : kept)
        if (t < begin) words.push_back(t);
      out.text += detokenize(words);
      const size_t close = std::min(samples.size(), seek + span);
      auto segments = timestamp_segments(kept, begin, timestamp_rules_->eot, seek / rate, close / rate, detokenize);
      out.segments.insert(out.segments.end(), segments.begin(), segments.end());
      out.window_starts.push_back(seek / rate);
      out.window_tokens.push_back(d.tokens);
      seek += seek_advance(cut, span, sample_rate());
    }
    out.windows = out.window_starts.size();
  }
  size_t lead = out.text.find_first_not_of(' ');
  out.text = lead == std::string::npos ? "" : out.text.substr(lead);
  out.language = language;
  return out;
}

}  // namespace mminfer::pipelines
