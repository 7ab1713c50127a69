#include "pipelines/generation/image_to_text.h"

#include <chrono>
#include <cmath>

#include "generate/beam_decode.h"
#include "generate/beam_result.h"
#include "modal/image/resize.h"
#include "pipelines/generation/folder_files.h"
#include "pipelines/generation/generative_folder.h"

namespace mminfer::pipelines {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

}  // namespace

ImageToText::ImageToText(const fs::path& dir, const SessionOptions& options, DType kv_cache) {
  if (!fs::is_directory(dir)) throw Error(dir.string() + ": not a folder");
  require_generative_kind(dir, GenerativeKind::kImageToText);
  EncoderDecoderFiles files = find_encoder_decoder_files(dir);
  tokenizer_ = load_tokenizer(dir);
  json config = read_json_object(dir / "config.json", true);
  fs::path pre_file = dir / "preprocessor_config.json";
  json pre = read_json_object(pre_file, true);

  if (pre.contains("size")) {
    const json& size = pre["size"];
    if (size.is_number_integer()) {
      width_ = height_ = size.get<int>();
    } else if (size.is_object()) {
      width_ = static_cast<int>(positive_int(size, "width", 224, pre_file));
      height_ = static_cast<int>(positive_int(size, "height", 224, pre_file));
    } else {
      throw Error(pre_file.string() + ": size must be a number or {\"height\", \"width\"}");
    }
  }
  resize_ = pre.value("do_resize", true);
  bool rescale = pre.value("do_rescale", true);
  double factor = pre.contains("rescale_factor") && pre["rescale_factor"].is_number() ? pre["rescale_factor"].get<double>() : 1 / 255.0;
  if (!rescale || std::fabs(factor * 255.0 - 1.0) > 1e-6)
    throw Error(pre_file.string() + ": only pixels rescaled by 1/255 are supported");
  if (pre.value("do_normalize", true)) {
    norm_.mean = float_triple(pre, "image_mean", {0.5f, 0.5f, 0.5f}, pre_file);
    norm_.std = float_triple(pre, "image_std", {0.5f, 0.5f, 0.5f}, pre_file);
    for (float s : norm_.std)
      if (!(s > 0)) throw Error(pre_file.string() + ": image_std must be positive");
  }
  const json& decoder_config = config.contains("decoder") && config["decoder"].is_object() ? config["decoder"] : config;
  context_ = positive_int(decoder_config, "n_positions",
                          positive_int(decoder_config, "max_position_embeddings", 0, dir / "config.json"), dir / "config.json");
  config_ = read_generation_settings(dir);
  if (!config_.decoder_start_token_id && !config_.bos_token_id)
    throw Error(dir.string() + ": no decoder_start_token_id in config.json or generation_config.json");
  Status s = Session::load(files.encoder, options, &encoder_);
  if (!s) throw Error(files.encoder + ": " + s.message());
  features_.set_identity(model_identity(files.encoder));
  decoder_ = std::make_unique<generate::EncoderDecoderModel>(files.first_decoder, files.with_past_decoder, options,
                                                                 kv_cache);
  first_decoder_ = files.first_decoder, with_past_decoder_ = files.with_past_decoder;
  options_ = options, kv_cache_ = kv_cache;
}

generate::EncoderDecoderModel& ImageToText::draft(int bits) {
  if (bits != 4 && bits != 8) throw Error("a draft decoder's weights are 4 or 8 bits, not " + std::to_string(bits));
  if (!draft_ || draft_bits_ != bits) {
    SessionOptions o = options_;
    o.precision.decoder_weight_bits = bits;
    o.profile = false;
    draft_ = std::make_unique<generate::EncoderDecoderModel>(first_decoder_, with_past_decoder_, o, kv_cache_);
    draft_bits_ = bits;
  }
  return *draft_;
}

generate::EncoderDecoderModel& ImageToText::with_heads() {
  if (!with_heads_) {
    SessionOptions o = options_;
    o.profile = false;
    with_heads_ = std::make_unique<generate::EncoderDecoderModel>(first_decoder_, with_past_decoder_, o, kv_cache_, true);
  }
  return *with_heads_;
}

Tensor ImageToText::preprocess(const image::Image& img) const {
  if (!resize_ && (img.width != width_ || img.height != height_))
    throw Error("the image is " + std::to_string(img.width) + "x" + std::to_string(img.height) + " and the model takes " +
                std::to_string(width_) + "x" + std::to_string(height_) + " without resizing");
  return image::to_chw(resize_ ? image::resize(img, width_, height_, image::ResizeFilter::kBilinear) : img, norm_);
}

Captions ImageToText::caption(const std::vector<image::Image>& images, const CaptionOptions& options) {
  if (images.empty()) throw Error("no image to caption");
  Captions out;
  std::vector<Tensor> pixels;
  std::vector<std::string> digests;
  for (const image::Image& img : images) {
    pixels.push_back(preprocess(img));
    digests.push_back(content_digest(pixels.back()));
  }
  auto t0 = std::chrono::steady_clock::now();
  std::vector<Tensor> rows = features_.rows("image", digests, [&](const std::vector<size_t>& items) {
    std::vector<Tensor> batch;
    for (size_t i : items) batch.push_back(pixels[i]);
    std::vector<Tensor> states;
    Status s = encoder_->run({{"pixel_values", image::stack_batch(batch)}}, &states);
    if (!s) throw Error(s.message());
    if (states.empty()) throw Error("the encoder gave no output");
    return states[0];
  });
  std::vector<Tensor> states = {stack_rows(rows)};
  out.encoder_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  generate::DecodeRequest request;
  request.config = config_;
  if (options.max_new_tokens) request.config.max_new_tokens = options.max_new_tokens;
  if (options.beams) request.config.num_beams = options.beams;
  request.config.num_return_sequences = 1;
  request.context = context_;
  request.prompts.assign(images.size(), {config_.decoder_start_token_id.value_or(config_.bos_token_id.value_or(0))});
  const generate::DecodeFn detokenize = detokenizer(*tokenizer_);
  const int64_t beams = static_cast<int64_t>(std::max<size_t>(1, request.config.num_beams));
  if (options.speculate > 0 && options.cascade_entropy >= 0) throw Error("speculative captions and the cascade do not mix");
  if (options.speculate > 0 || options.cascade_entropy >= 0) {
    if (beams > 1) throw Error(std::string(options.speculate ? "speculative" : "cascaded") + " captions are greedy: no beam search with them");
    if (options.draft_heads && !options.speculate) throw Error("draft heads propose tokens for speculative captions only");
    // Draft heads are the target's own: no second decoder runs.
    generate::EncoderDecoderModel& target = options.draft_heads ? with_heads() : *decoder_;
    generate::EncoderDecoderModel& light = options.draft_heads ? target : draft(options.draft_bits);
    // One image at a time: each pass reads one row's encoder states.
    for (size_t i = 0; i < images.size(); ++i) {
      const Tensor image_states = batch_row(states[0], static_cast<int64_t>(i));
      target.set_encoder_states(image_states, 1);
      light.set_encoder_states(image_states, 1);
      generate::DecodeRequest one = request;
      one.prompts = {request.prompts[i]};
      generate::DecodeTimings t;
      if (options.speculate) {
        generate::SpeculativeStats s;
        out.sequences.push_back(
            (options.draft_heads ? generate::head_speculative_decode(target, one, options.speculate, detokenize, &t, &s)
                                 : generate::speculative_decode(target, light, one, options.speculate, detokenize, &t, &s))
                .at(0));
        out.speculation.rounds += s.rounds, out.speculation.proposed += s.proposed, out.speculation.accepted += s.accepted;
      } else {
        generate::CascadeStats s;
        out.sequences.push_back(generate::cascade_decode(*decoder_, light, one, options.cascade_entropy, detokenize, &t, &s).at(0));
        out.cascade.add(s);
      }
      out.timings.add(t);
    }
    return out;
  }
  // The images decode in groups of at most max_batch rows (0: all of them together).
  const size_t group = options.max_batch ? options.max_batch : images.size();
  for (size_t from = 0; from < images.size(); from += group) {
    const size_t n = std::min(group, images.size() - from);
    std::vector<Tensor> part;
    for (size_t i = from; i < from + n; ++i) part.push_back(batch_row(states[0], static_cast<int64_t>(i)));
    decoder_->set_encoder_states(n == images.size() ? states[0] : stack_rows(part), beams);
    generate::DecodeRequest some = request;
    some.prompts.assign(request.prompts.begin() + from, request.prompts.begin() + from + n);
    generate::DecodeTimings t;
    if (beams > 1) {
      for (const auto& best : generate::beam_decode(*decoder_, some, &t))
        out.sequences.push_back(generate::best_sequence(best, some.config, detokenize));
    } else {
      for (auto& seq : generate::decode(*decoder_, some, detokenize, &t)) out.sequences.push_back(std::move(seq));
    }
    out.timings.add(t);
  }
  return out;
}

}  // namespace mminfer::pipelines
