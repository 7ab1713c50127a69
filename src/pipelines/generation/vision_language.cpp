#include "pipelines/generation/vision_language.h"

#include "pipelines/generation/image_token_pruning.h"

#include <chrono>
#include <cstring>
#include <map>
#include <optional>

#include "generate/step_model.h"
#include "modal/image/resize.h"
#include "modal/image/tile_split.h"
#include "pipelines/generation/folder_files.h"
#include "pipelines/generation/generative_folder.h"

namespace mminfer::pipelines {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::unique_ptr<Session> load(const fs::path& dir, const std::string& name, const SessionOptions& options) {
  std::string path = find_model_file(dir, name);
  if (path.empty()) throw Error(dir.string() + ": " + name + " is missing");
  std::unique_ptr<Session> s;
  Status st = Session::load(path, options, &s);
  if (!st) throw Error(path + ": " + st.message());
  return s;
}

Tensor run_one(Session& s, const std::string& input, const Tensor& t) {
  std::vector<Tensor> out;
  Status st = s.run({{input, t}}, &out);
  if (!st) throw Error(st.message());
  if (out.empty() || out[0].dtype() != DType::kFloat32 || out[0].rank() != 3)
    throw Error("expected float32 [batch, positions, width] from the model given '" + input + "'");
  return out[0];
}

// Frames [f_i, 3, H, W] of several images, one after another: [sum f_i, 3, H, W].
Tensor concat_frames(const std::vector<Tensor>& images) {
  if (images.size() == 1) return images[0];
  Shape shape = images[0].shape();
  shape[0] = 0;
  for (const Tensor& t : images) shape[0] += t.dim(0);
  Tensor out = Tensor::empty(DType::kFloat32, shape);
  char* at = static_cast<char*>(out.raw());
  for (const Tensor& t : images) {
    std::memcpy(at, t.raw(), t.nbytes());
    at += t.nbytes();
  }
  return out;
}

// Writes the image's features over the image tokens' rows of `embeds` ([1, positions, width]).
void splice_features(Tensor& embeds, const std::vector<generate::TokenId>& prompt, generate::TokenId image_token,
                     const Tensor* features) {
  const int64_t width = embeds.dim(2);
  int64_t used = 0;
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] != image_token) continue;
    if (!features || used >= features->dim(1)) throw Error("the prompt holds more image tokens than the image has features");
    if (features->dim(2) != width)
      throw Error("image features are " + std::to_string(features->dim(2)) + " wide, token embeddings " + std::to_string(width));
    std::memcpy(embeds.data<float>() + i * width, features->data<float>() + used * width, sizeof(float) * width);
    ++used;
  }
  if (features && used != features->dim(1))
    throw Error("the prompt holds " + std::to_string(used) + " image tokens for " + std::to_string(features->dim(1)) +
                " image features");
}

// Rows `positions` of [1, positions, width] embeddings, in order.
Tensor kept_rows(const Tensor& embeddings, const std::vector<size_t>& positions) {
  const int64_t width = embeddings.dim(2);
  Tensor kept = Tensor::empty(DType::kFloat32, {1, static_cast<int64_t>(positions.size()), width});
  for (size_t k = 0; k < positions.size(); ++k)
    std::memcpy(kept.data<float>() + k * width, embeddings.data<float>() + positions[k] * width, sizeof(float) * width);
  return kept;
}

// Embeds tokens and, in the prefill, writes the image's features over the image tokens.
class VisionLanguageModel final : public generate::StepModel {
 public:
  // `prompt_embeddings`, when given, are the prompt's token embeddings already made (the kept
  // rows of a pruned prompt's), so the prefill does not embed it again.
  VisionLanguageModel(runtime::CachedDecoder& decoder, Session& embed, generate::TokenId image_token, const Tensor* features,
                      Tensor prompt_embeddings = {})
      : decoder_(decoder), embed_(embed), image_token_(image_token), features_(features),
        prompt_embeddings_(std::move(prompt_embeddings)) {}
  void start(int64_t rows, int64_t capacity) override { cache_.emplace(decoder_.make_cache(rows, capacity)); }
  int64_t length(int64_t row) const override { return cache_->length(row); }
  int64_t capacity() const override { return cache_->capacity(); }
  size_t cache_bytes() const override { return cache_->bytes(); }
  void reorder(std::span<const int64_t> sources) override { cache_->reorder(sources); }

  Tensor prefill(int64_t row, const std::vector<generate::TokenId>& prompt) override {
    Tensor embeds = prompt_embeddings_.defined() && prompt_embeddings_.dim(1) == static_cast<int64_t>(prompt.size())
                        ? prompt_embeddings_
                        : run_one(embed_, "input_ids", generate::ids_tensor(prompt));
    splice_features(embeds, prompt, image_token_, features_);
    return decoder_.step(*cache_, row, "inputs_embeds", embeds);
  }
  Tensor step(int64_t row, const Tensor& ids) override {
    return decoder_.step(*cache_, row, "inputs_embeds", run_one(embed_, "input_ids", ids));
  }
  void set_greedy_process(runtime::GreedyRowProcess process) override { decoder_.set_greedy_process(std::move(process)); }

 private:
  runtime::CachedDecoder& decoder_;
  Session& embed_;
  generate::TokenId image_token_;
  const Tensor* features_;
  Tensor prompt_embeddings_;
  std::optional<runtime::KvCache> cache_;
};

// PIL's resample codes in preprocessor_config.json; transformers' Idefics3 default is LANCZOS.
image::ResizeFilter resample_filter(const json& pre, const fs::path& file) {
  if (!pre.contains("resample") || pre["resample"].is_null()) return image::ResizeFilter::kLanczos;
  const int code = pre["resample"].is_number_integer() ? pre["resample"].get<int>() : -1;
  switch (code) {
    case 1: return image::ResizeFilter::kLanczos;
    case 2: return image::ResizeFilter::kBilinear;
    case 3: return image::ResizeFilter::kBicubic;
    default:
      throw Error(file.string() + ": resample " + pre["resample"].dump() + " is not supported (1 LANCZOS, 2 BILINEAR, 3 BICUBIC)");
  }
}

}  // namespace

VisionLanguage::VisionLanguage(const fs::path& dir, const SessionOptions& options, DType kv_cache) {
  if (!fs::is_directory(dir)) throw Error(dir.string() + ": not a folder");
  require_generative_kind(dir, GenerativeKind::kVisionLanguage);
  fs::path config_file = dir / "config.json", pre_file = dir / "preprocessor_config.json";
  json config = read_json_object(config_file, true);
  json pre = read_json_object(pre_file, false);
  tokenizer_ = load_tokenizer(dir);
  if (!config.contains("image_token_id") || !config["image_token_id"].is_number_integer())
    throw Error(config_file.string() + ": image_token_id is missing");
  image_token_ = config["image_token_id"].get<generate::TokenId>();
  image_seq_len_ = positive_int(config, "image_seq_len", 64, config_file);
  const json& text = config.contains("text_config") ? config["text_config"] : config;
  context_ = positive_int(text, "max_position_embeddings", 0, config_file);
  if (pre.contains("size") && pre["size"].is_object()) size_ = static_cast<int>(positive_int(pre["size"], "longest_edge", size_, pre_file));
  filter_ = resample_filter(pre, pre_file);
  if (pre.value("do_image_splitting", false)) {
    if (!pre.contains("max_image_size") || !pre["max_image_size"].is_object())
      throw Error(pre_file.string() + ": do_image_splitting needs max_image_size.longest_edge");
    tile_ = static_cast<int>(positive_int(pre["max_image_size"], "longest_edge", 0, pre_file));
    if (tile_ == 0) throw Error(pre_file.string() + ": do_image_splitting needs max_image_size.longest_edge");
    if (!pre.value("do_resize", true)) size_ = 0;  // no longest-edge resize before the split
  }
  if (pre.value("do_normalize", true)) {
    norm_.mean = float_triple(pre, "image_mean", {0.5f, 0.5f, 0.5f}, pre_file);
    norm_.std = float_triple(pre, "image_std", {0.5f, 0.5f, 0.5f}, pre_file);
  }
  config_ = read_generation_settings(dir);
  template_ = ChatTemplate::from_folder(dir);
  vision_ = load(dir, "vision_encoder.onnx", options);
  features_.set_identity(model_identity(find_model_file(dir, "vision_encoder.onnx")));
  bool has_pixels = false;
  for (const ValueInfo& in : vision_->inputs()) {
    if (in.name == "pixel_values") {
      has_pixels = true;
      images_axis_ = in.has_shape && in.dims.size() == 5;
      // The axis frames go on: the batch of a 4-D input, the images of a 5-D one.
      if (in.has_shape && in.dims.size() >= 4) {
        frame_per_run_ = in.dims[images_axis_ ? 1 : 0] == 1;
        const int64_t h = in.dims[in.dims.size() - 2], w = in.dims.back();
        if (tile_ && ((h > 0 && h != tile_) || (w > 0 && w != tile_)))
          throw Error(dir.string() + ": vision_encoder.onnx takes " + std::to_string(w) + "x" + std::to_string(h) +
                      " images but max_image_size.longest_edge is " + std::to_string(tile_));
      }
    } else if (in.name == "pixel_attention_mask") pixel_mask_ = true;
    else throw Error(dir.string() + ": vision_encoder.onnx takes '" + in.name + "' (known: pixel_values, pixel_attention_mask)");
  }
  if (!has_pixels) throw Error(dir.string() + ": vision_encoder.onnx takes no pixel_values");
  embed_ = load(dir, "embed_tokens.onnx", options);
  std::string decoder = find_model_file(dir, "decoder_model_merged.onnx");
  if (decoder.empty()) throw Error(dir.string() + ": decoder_model_merged.onnx is missing");
  decoder_ = std::make_unique<runtime::CachedDecoder>(decoder, options, kv_cache);
  if (!decoder_->has_input("inputs_embeds")) throw Error(decoder + ": the decoder takes no inputs_embeds");
}

// Idefics3's expansion of one image: each tile's block row by row (a newline ending each row),
// then the global image's; an unsplit image has the global block only.
std::string VisionLanguage::image_block(int rows, int cols) const {
  std::string tokens;
  for (int64_t i = 0; i < image_seq_len_; ++i) tokens += "<image>";
  const std::string global = "<fake_token_around_image><global-img>" + tokens + "<fake_token_around_image>";
  if (rows == 0 && cols == 0) return global;
  std::string out;
  for (int r = 1; r <= rows; ++r) {
    for (int c = 1; c <= cols; ++c)
      out += "<fake_token_around_image><row_" + std::to_string(r) + "_col_" + std::to_string(c) + ">" + tokens;
    out += "\n";
  }
  return out + "\n" + global;
}

std::string VisionLanguage::prompt_text(const std::string& question, bool with_image, int rows, int cols) const {
  std::string text = template_ ? template_->render(ChatTemplate::user_turn(question, with_image), true)
                               : "<|im_start|>User:" + std::string(with_image ? "<image>" : "") + question +
                                     "<end_of_utterance>\nAssistant:";
  return expand_images(text, with_image ? 1 : 0, rows, cols);
}

std::string VisionLanguage::expand_images(const std::string& text, int want, int rows, int cols) const {
  const std::string image = image_block(rows, cols);
  std::string out;
  int images = 0;
  for (size_t at = 0;;) {  // every <image> the template wrote becomes the image's tokens
    size_t next = text.find("<image>", at);
    out += text.substr(at, next == std::string::npos ? std::string::npos : next - at);
    if (next == std::string::npos) break;
    out += image;
    ++images;
    at = next + 7;
  }
  if (images != want)
    throw Error((template_ ? template_->file() : std::string("the prompt")) + " wrote " + std::to_string(images) +
                " <image> markers for " + std::to_string(want) + " image");
  return out;
}

VisionLanguage::Conversation VisionLanguage::conversation(const nlohmann::ordered_json& messages, const image::Image* img) {
  ConversationOrError c = std::move(conversations({{&messages, img}})[0]);
  if (!c.error.empty()) throw Error(c.error);
  return std::move(c.conversation);
}

std::vector<VisionLanguage::ConversationOrError> VisionLanguage::conversations(const std::vector<ChatInput>& inputs) {
  const size_t n = inputs.size();
  std::vector<Frames> f(n);
  std::vector<std::string> digests(n);
  std::vector<Tensor> features(n);
  // Images with as many frames share a feature row shape: each such group is one rows() call,
  // whose missing images are encoded in one run over their frames.
  std::map<int64_t, std::vector<size_t>> by_frames;
  for (size_t i = 0; i < n; ++i)
    if (inputs[i].image) {
      f[i] = frames(*inputs[i].image);
      digests[i] = content_digest(f[i].pixels);
      by_frames[f[i].pixels.dim(0)].push_back(i);
    }
  for (const auto& [count, group] : by_frames) {
    std::vector<std::string> keys;
    for (size_t i : group) keys.push_back(digests[i]);
    std::vector<Tensor> rows = features_.rows("image", keys, [&](const std::vector<size_t>& items) {
      std::vector<Tensor> pixels;
      for (size_t k : items) pixels.push_back(f[group[k]].pixels);
      Tensor all = encode_frames(concat_frames(pixels));  // [1, items * count * image_seq_len, width]
      const auto m = static_cast<int64_t>(items.size());
      return Tensor::alias(all, DType::kFloat32, {m, all.dim(1) / m, all.dim(2)}, all.raw());
    });
    for (size_t k = 0; k < group.size(); ++k) features[group[k]] = std::move(rows[k]);
  }
  std::vector<ConversationOrError> out(n);
  for (size_t i = 0; i < n; ++i) {
    try {
      out[i].conversation = converse(*inputs[i].messages, inputs[i].image ? &f[i] : nullptr,
                                     inputs[i].image ? &features[i] : nullptr, digests[i]);
    } catch (const std::exception& e) {
      out[i].error = e.what();
    }
  }
  return out;
}

VisionLanguage::Conversation VisionLanguage::converse(const nlohmann::ordered_json& messages, const Frames* frames,
                                                      const Tensor* features, std::string image_digest) {
  Conversation c;
  c.image_digest = std::move(image_digest);
  const bool img = frames != nullptr;
  const Frames none;
  const Frames& f = img ? *frames : none;
  std::string text;
  if (template_) {
    text = expand_images(template_->render(messages, true), img ? 1 : 0, f.rows, f.cols);
  } else {
    if (messages.size() != 1 || messages[0].value("role", "") != "user")
      throw Error("this folder has no chat template, so it takes one user message, not a conversation");
    const auto& content = messages[0]["content"];
    std::string question = content.is_string() ? content.get<std::string>() : "";
    if (content.is_array())
      for (const auto& part : content)
        if (part.value("type", "") == "text") question += part.value("text", "");
    text = prompt_text(question, img, f.rows, f.cols);
  }
  text::Encoding e = tokenizer_->encode(text, false);
  c.ids.assign(e.ids.begin(), e.ids.end());
  c.embeddings = run_one(*embed_, "input_ids", generate::ids_tensor(c.ids));
  if (features && prune_image_tokens_ > 0) {
    PrunedImageTokens pruned = prune_image_tokens(c.ids, image_token_, c.embeddings, *features, prune_image_tokens_);
    // The kept positions' rows of the embeddings already made, the kept features over them.
    c.ids = std::move(pruned.prompt);
    c.embeddings = kept_rows(c.embeddings, pruned.positions);
    splice_features(c.embeddings, c.ids, image_token_, &pruned.features);
    // The image tokens' ids are all alike: the rows kept tell prompts that kept others apart
    // (the server's prefix cache keys on the ids and this digest).
    c.image_digest += "|rows";
    for (size_t r : pruned.rows) c.image_digest += "," + std::to_string(r);
    return c;
  }
  splice_features(c.embeddings, c.ids, image_token_, features);
  return c;
}

void VisionLanguage::check_ids(const std::vector<generate::TokenId>& ids) const {
  for (generate::TokenId id : ids)
    if (id < 0 || id >= tokenizer_->vocab_end())
      throw Error("token id " + std::to_string(id) + " is outside the model's vocabulary of " +
                  std::to_string(tokenizer_->vocab_end()) + " tokens");
}

Tensor VisionLanguage::embed(const Tensor& ids) { return run_one(*embed_, "input_ids", ids); }

generate::DecodeFn VisionLanguage::detokenizer(bool skip_special) const { return pipelines::detokenizer(*tokenizer_, skip_special); }

std::vector<generate::TokenId> VisionLanguage::encode(const std::string& text) const {
  text::Encoding e = tokenizer_->encode(text, true);
  return std::vector<generate::TokenId>(e.ids.begin(), e.ids.end());
}

std::vector<generate::TokenId> VisionLanguage::prompt_ids(const std::string& question, bool with_image, int rows,
                                                          int cols) const {
  text::Encoding e = tokenizer_->encode(prompt_text(question, with_image, rows, cols), false);
  return std::vector<generate::TokenId>(e.ids.begin(), e.ids.end());
}

VisionLanguage::Frames VisionLanguage::frames(const image::Image& img) const {
  Frames out;
  std::vector<Tensor> chw;
  if (tile_) {
    image::TiledImage tiled = image::split_into_tiles(img, size_, tile_, filter_);
    out.rows = tiled.rows, out.cols = tiled.cols;
    for (const image::Image& frame : tiled.frames) chw.push_back(image::to_chw(frame, norm_));
  } else {
    chw.push_back(image::to_chw(image::resize(img, size_, size_, filter_), norm_));
  }
  out.pixels = image::stack_batch(chw);  // every frame is tile_ x tile_ (or size_ x size_)
  return out;
}

// Features [1, frames * image_seq_len, width], the frames' rows in order.
Tensor VisionLanguage::encode_frames(const Tensor& px) {
  const int64_t n = px.dim(0);
  if (!frame_per_run_) return run_encoder(px);
  std::vector<Tensor> parts;
  for (int64_t i = 0; i < n; ++i) parts.push_back(run_encoder(batch_row(px, i)));
  int64_t rows = 0;
  for (const Tensor& p : parts) rows += p.dim(1);
  Tensor out = Tensor::empty(DType::kFloat32, {1, rows, parts[0].dim(2)});
  char* at = static_cast<char*>(out.raw());
  for (const Tensor& p : parts) {
    if (p.dim(2) != out.dim(2)) throw Error("vision_encoder.onnx gave features of different widths for one image's frames");
    std::memcpy(at, p.raw(), p.nbytes());
    at += p.nbytes();
  }
  return out;
}

// One encoder run over px [frames, 3, H, W]: features [1, frames * image_seq_len, width].
Tensor VisionLanguage::run_encoder(const Tensor& px) {
  const int64_t n = px.dim(0), h = px.dim(2), w = px.dim(3);
  std::vector<NamedTensor> inputs;
  if (images_axis_) {
    Tensor five = Tensor::empty(DType::kFloat32, {1, n, 3, h, w});
    std::memcpy(five.raw(), px.raw(), px.nbytes());
    inputs.emplace_back("pixel_values", five);
  } else {
    inputs.emplace_back("pixel_values", px);
  }
  if (pixel_mask_) {  // frames of one size: no padding
    Tensor mask = Tensor::empty(DType::kBool, images_axis_ ? Shape{1, n, h, w} : Shape{n, h, w});
    std::memset(mask.raw(), 1, mask.nbytes());
    inputs.emplace_back("pixel_attention_mask", mask);
  }
  std::vector<Tensor> out;
  Status st = vision_->run(inputs, &out);
  if (!st) throw Error(st.message());
  if (out.empty() || out[0].dtype() != DType::kFloat32 || out[0].rank() != 3)
    throw Error("expected float32 [frames, positions, width] image features from vision_encoder.onnx");
  const int64_t rows = out[0].dim(0) * out[0].dim(1);
  if (rows != n * image_seq_len_)
    throw Error("vision_encoder.onnx gave " + std::to_string(rows) + " feature rows for " + std::to_string(n) +
                " frames of image_seq_len " + std::to_string(image_seq_len_));
  Tensor flat = Tensor::empty(DType::kFloat32, {1, rows, out[0].dim(2)});
  std::memcpy(flat.raw(), out[0].raw(), out[0].nbytes());
  return flat;
}

void VisionLanguage::set_image_token_pruning(double share_removed) {
  if (!(share_removed >= 0 && share_removed < 1)) throw Error("the share of image tokens removed is from 0 to below 1");
  prune_image_tokens_ = share_removed;
}

generate::DecodedSequence VisionLanguage::answer(const std::string& question, const image::Image* img,
                                                 generate::DecodeRequest request, generate::DecodeTimings* timings,
                                                 double* encoder_ms, int* image_frames, std::pair<size_t, size_t>* image_tokens) {
  Tensor features;
  Frames f;
  auto t0 = std::chrono::steady_clock::now();
  if (img) {
    f = frames(*img);
    // Keyed by every frame's pixels: the digest covers the stacked tensor's shape and bytes.
    features = features_.rows("image", {content_digest(f.pixels)}, [&](const std::vector<size_t>&) {
      return encode_frames(f.pixels);
    })[0];
  }
  if (encoder_ms) *encoder_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (image_frames) *image_frames = img ? static_cast<int>(f.pixels.dim(0)) : 0;
  request.prompts = {prompt_ids(question, img != nullptr, f.rows, f.cols)};
  if (request.context <= 0) request.context = context_;
  const int64_t length = static_cast<int64_t>(request.prompts[0].size());
  if (f.rows > 0 && request.context > 0 && length >= request.context)
    throw Error("the image split into " + std::to_string(f.rows) + "x" + std::to_string(f.cols) + " tiles and a global image (" +
                std::to_string(f.pixels.dim(0) * image_seq_len_) + " image tokens) makes a " + std::to_string(length) +
                "-token prompt; the model's context is " + std::to_string(request.context) + " positions");
  Tensor kept_embeddings;
  if (img && prune_image_tokens_ > 0) {
    const Tensor embeddings = run_one(*embed_, "input_ids", generate::ids_tensor(request.prompts[0]));
    PrunedImageTokens pruned = prune_image_tokens(request.prompts[0], image_token_, embeddings, features, prune_image_tokens_);
    kept_embeddings = kept_rows(embeddings, pruned.positions);
    request.prompts[0] = std::move(pruned.prompt);
    features = pruned.features;
    if (image_tokens) *image_tokens = {pruned.kept, pruned.total};
  } else if (image_tokens) {
    *image_tokens = {img ? static_cast<size_t>(features.dim(1)) : 0, img ? static_cast<size_t>(features.dim(1)) : 0};
  }
  VisionLanguageModel model(*decoder_, *embed_, image_token_, img ? &features : nullptr, kept_embeddings);
  return generate::decode(model, request, detokenizer(), timings).at(0);
}

}  // namespace mminfer::pipelines
