#include "pipelines/generation/text_generator.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "generate/beam_decode.h"
#include "generate/beam_result.h"
#include "mminfer/status.h"
#include "pipelines/generation/folder_files.h"
#include "pipelines/generation/generative_folder.h"

namespace mminfer::pipelines {

namespace fs = std::filesystem;

namespace {

std::string find_decoder(const fs::path& dir) {
  for (const char* name : {"model.onnx", "decoder_model_merged.onnx", "decoder_with_past_model.onnx"}) {
    std::string path = find_model_file(dir, name);
    if (!path.empty()) return path;
  }
  throw Error(dir.string() + ": no decoder found (model.onnx, decoder_model_merged.onnx or decoder_with_past_model.onnx)");
}

}  // namespace

TextGenerator::TextGenerator(const fs::path& dir, const SessionOptions& options, DType kv_cache) {
  if (!fs::is_directory(dir)) throw Error(dir.string() + ": not a folder");
  require_generative_kind(dir, GenerativeKind::kTextGeneration);
  tokenizer_ = load_tokenizer(dir);
  if (!fs::is_regular_file(dir / "config.json")) throw Error(dir.string() + ": config.json is missing");
  nlohmann::json config = read_json_object(dir / "config.json", true);
  const nlohmann::json& text = config.contains("text_config") ? config["text_config"] : config;
  if (text.contains("max_position_embeddings") && text["max_position_embeddings"].is_number_integer())
    context_ = text["max_position_embeddings"].get<int64_t>();
  config_ = read_generation_settings(dir);
  if (text.contains("vocab_size") && text["vocab_size"].is_number_integer()) vocab_ = text["vocab_size"].get<int64_t>();
  if (vocab_ > 0 && tokenizer_->vocab_end() > vocab_)
    throw Error(dir.string() + ": tokenizer.json has ids up to " + std::to_string(tokenizer_->vocab_end() - 1) +
                " but the model's vocabulary holds " + std::to_string(vocab_) + " tokens: the tokenizer does not belong to this model");
  decoder_file_ = find_decoder(dir);
  decoder_ = std::make_unique<runtime::CachedDecoder>(decoder_file_, options, kv_cache);
  if (!decoder_->has_input("input_ids"))
    throw Error(decoder_file_ + ": the decoder takes no input_ids (a vision-language decoder needs its embeddings)");
}

std::vector<generate::TokenId> TextGenerator::encode(const std::string& prompt, bool add_special_tokens) const {
  text::Encoding e = tokenizer_->encode(prompt, add_special_tokens);
  return std::vector<generate::TokenId>(e.ids.begin(), e.ids.end());
}

std::string TextGenerator::decode_tokens(const std::vector<generate::TokenId>& ids) const {
  return pipelines::detokenizer(*tokenizer_)(ids);
}

generate::DecodeFn TextGenerator::detokenizer(bool skip_special) const { return pipelines::detokenizer(*tokenizer_, skip_special); }

void TextGenerator::check_ids(const std::vector<generate::TokenId>& ids) const {
  int64_t end = vocab_ > 0 ? vocab_ : tokenizer_->vocab_end();
  for (generate::TokenId id : ids)
    if (id < 0 || id >= end)
      throw Error("token id " + std::to_string(id) + " is outside the model's vocabulary of " + std::to_string(end) + " tokens");
}

std::vector<generate::DecodedSequence> TextGenerator::generate(const std::vector<std::string>& prompts,
                                                              generate::DecodeRequest request,
                                                              generate::DecodeTimings* timings) {
  if (request.prompts.empty())
    for (const std::string& p : prompts) request.prompts.push_back(encode(p));
  for (const auto& ids : request.prompts) check_ids(ids);
  if (request.context <= 0) request.context = context_;
  const generate::DecodeFn detokenize = detokenizer();
  generate::DecoderOnlyModel model(*decoder_);
  if (request.config.num_beams <= 1) return generate::decode(model, request, detokenize, timings);
  // Beam search, one prompt at a time: its rows must share a length.
  std::vector<generate::DecodedSequence> out;
  generate::DecodeTimings total;
  for (const auto& prompt : request.prompts) {
    generate::DecodeRequest one = request;
    one.prompts = {prompt};
    generate::DecodeTimings t;
    auto best = generate::beam_decode(model, one, &t);
    out.push_back(generate::best_sequence(best.at(0), request.config, detokenize));
    if (request.on_text) request.on_text(out.size() - 1, out.back().tokens.back(), out.back().text);
    t.new_tokens = out.back().tokens.size();  // the best beam's, not every row's
    total.add(t);
  }
  if (timings) *timings = total;
  return out;
}

std::vector<generate::DecodedSequence> TextGenerator::generate_speculative(TextGenerator& draft, generate::DecodeRequest request,
                                                                          size_t k, generate::DecodeTimings* timings,
                                                                          generate::SpeculativeStats* stats) {
  prepare_paired(draft, request);
  generate::DecoderOnlyModel target(*decoder_), proposer(draft.decoder());
  return generate::speculative_decode(target, proposer, request, k, detokenizer(), timings, stats);
}

std::vector<generate::DecodedSequence> TextGenerator::generate_cascade(TextGenerator& light, generate::DecodeRequest request,
                                                                      double max_entropy, generate::DecodeTimings* timings,
                                                                      generate::CascadeStats* stats) {
  prepare_paired(light, request);
  generate::DecoderOnlyModel full(*decoder_), cheap(light.decoder());
  return generate::cascade_decode(full, cheap, request, max_entropy, detokenizer(), timings, stats);
}

void TextGenerator::prepare_paired(const TextGenerator& other, generate::DecodeRequest& request) const {
  if (other.vocab() != vocab())
    throw Error("the draft's vocabulary holds " + std::to_string(other.vocab()) + " tokens and the model's " +
                std::to_string(vocab()) + ": a draft must share the model's tokenizer");
  for (const auto& ids : request.prompts) check_ids(ids);
  if (request.context <= 0) request.context = context_;
}

}  // namespace mminfer::pipelines
