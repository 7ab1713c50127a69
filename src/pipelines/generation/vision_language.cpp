#include "pipelines/generation/vision_language.h"

#include <chrono>
#include <cstring>
#include <optional>

#include "generate/step_model.h"
#include "modal/image/resize.h"
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

// Embeds tokens and, in the prefill, writes the image's features over the image tokens.
class VisionLanguageModel final : public generate::StepModel {
 public:
  VisionLanguageModel(runtime::CachedDecoder& decoder, Session& embed, generate::TokenId image_token, const Tensor* features)
      : decoder_(decoder), embed_(embed), image_token_(image_token), features_(features) {}
  void start(int64_t rows, int64_t capacity) override { cache_.emplace(decoder_.make_cache(rows, capacity)); }
  int64_t length(int64_t row) const override { return cache_->length(row); }
  int64_t capacity() const override { return cache_->capacity(); }
  size_t cache_bytes() const override { return cache_->bytes(); }
  void reorder(std::span<const int64_t> sources) override { cache_->reorder(sources); }

  Tensor prefill(int64_t row, const std::vector<generate::TokenId>& prompt) override {
    Tensor embeds = run_one(embed_, "input_ids", generate::ids_tensor(prompt));
    const int64_t width = embeds.dim(2);
    int64_t used = 0;
    for (size_t i = 0; i < prompt.size(); ++i) {
      if (prompt[i] != image_token_) continue;
      if (!features_ || used >= features_->dim(1))
        throw Error("the prompt holds more image tokens than the image has features");
      if (features_->dim(2) != width)
        throw Error("image features are " + std::to_string(features_->dim(2)) + " wide, token embeddings " + std::to_string(width));
      std::memcpy(embeds.data<float>() + i * width, features_->data<float>() + used * width, sizeof(float) * width);
      ++used;
    }
    if (features_ && used != features_->dim(1))
      throw Error("the prompt holds " + std::to_string(used) + " image tokens for " + std::to_string(features_->dim(1)) +
                  " image features");
    return decoder_.step(*cache_, row, "inputs_embeds", embeds);
  }
  Tensor step(int64_t row, const Tensor& ids) override {
    return decoder_.step(*cache_, row, "inputs_embeds", run_one(embed_, "input_ids", ids));
  }

 private:
  runtime::CachedDecoder& decoder_;
  Session& embed_;
  generate::TokenId image_token_;
  const Tensor* features_;
  std::optional<runtime::KvCache> cache_;
};

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
  if (pre.value("do_image_splitting", false)) throw Error(pre_file.string() + ": image splitting is not supported yet");
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
    if (in.name == "pixel_values") has_pixels = true, images_axis_ = in.has_shape && in.dims.size() == 5;
    else if (in.name == "pixel_attention_mask") pixel_mask_ = true;
    else throw Error(dir.string() + ": vision_encoder.onnx takes '" + in.name + "' (known: pixel_values, pixel_attention_mask)");
  }
  if (!has_pixels) throw Error(dir.string() + ": vision_encoder.onnx takes no pixel_values");
  embed_ = load(dir, "embed_tokens.onnx", options);
  std::string decoder = find_model_file(dir, "decoder_model_merged.onnx");
  if (decoder.empty()) throw Error(dir.string() + ": decoder_model_merged.onnx is missing");
  decoder_ = std::make_unique<runtime::CachedDecoder>(decoder, options, kv_cache);
  if (!decoder_->has_input("inputs_embeds")) throw Error(decoder + ": the decoder takes no inputs_embeds");
}

std::string VisionLanguage::prompt_text(const std::string& question, bool with_image) const {
  std::string text = template_ ? template_->render(ChatTemplate::user_turn(question, with_image), true)
                               : "<|im_start|>User:" + std::string(with_image ? "<image>" : "") + question +
                                     "<end_of_utterance>\nAssistant:";
  std::string image = "<fake_token_around_image><global-img>";
  for (int64_t i = 0; i < image_seq_len_; ++i) image += "<image>";
  image += "<fake_token_around_image>";
  std::string out;
  size_t images = 0;
  for (size_t at = 0;;) {  // every <image> the template wrote becomes the image's tokens
    size_t next = text.find("<image>", at);
    out += text.substr(at, next == std::string::npos ? std::string::npos : next - at);
    if (next == std::string::npos) break;
    out += image;
    ++images;
    at = next + 7;
  }
  if (images != (with_image ? 1u : 0u))
    throw Error((template_ ? template_->file() : std::string("the prompt")) + " wrote " + std::to_string(images) +
                " <image> markers for " + std::to_string(with_image ? 1 : 0) + " image");
  return out;
}

std::vector<generate::TokenId> VisionLanguage::prompt_ids(const std::string& question, bool with_image) const {
  text::Encoding e = tokenizer_->encode(prompt_text(question, with_image), false);
  return std::vector<generate::TokenId>(e.ids.begin(), e.ids.end());
}

Tensor VisionLanguage::pixels(const image::Image& img) const {
  Tensor chw = image::to_chw(image::resize(img, size_, size_, image::ResizeFilter::kBilinear), norm_);
  std::vector<Tensor> one = {chw};
  return image::stack_batch(one);
}

Tensor VisionLanguage::encode_image(const Tensor& px) {
  const int64_t h = px.dim(2), w = px.dim(3);
  std::vector<NamedTensor> inputs;
  if (images_axis_) {
    Tensor five = Tensor::empty(DType::kFloat32, {1, 1, 3, h, w});
    std::memcpy(five.raw(), px.raw(), px.nbytes());
    inputs.emplace_back("pixel_values", five);
  } else {
    inputs.emplace_back("pixel_values", px);
  }
  if (pixel_mask_) {  // every pixel is the image's: no padding without splitting
    Tensor mask = Tensor::empty(DType::kBool, images_axis_ ? Shape{1, 1, h, w} : Shape{1, h, w});
    std::memset(mask.raw(), 1, mask.nbytes());
    inputs.emplace_back("pixel_attention_mask", mask);
  }
  std::vector<Tensor> out;
  Status st = vision_->run(inputs, &out);
  if (!st) throw Error(st.message());
  if (out.empty() || out[0].dtype() != DType::kFloat32 || out[0].rank() != 3 || out[0].dim(0) != 1)
    throw Error("expected float32 [1, positions, width] image features from vision_encoder.onnx");
  return out[0];
}

generate::DecodedSequence VisionLanguage::answer(const std::string& question, const image::Image* img,
                                                 generate::DecodeRequest request, generate::DecodeTimings* timings,
                                                 double* encoder_ms) {
  Tensor features;
  auto t0 = std::chrono::steady_clock::now();
  if (img) {
    Tensor px = pixels(*img);
    features = features_.rows("image", {content_digest(px)}, [&](const std::vector<size_t>&) { return encode_image(px); })[0];
  }
  if (encoder_ms) *encoder_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  request.prompts = {prompt_ids(question, img != nullptr)};
  if (request.context <= 0) request.context = context_;
  VisionLanguageModel model(*decoder_, *embed_, image_token_, img ? &features : nullptr);
  return generate::decode(model, request, detokenizer(*tokenizer_), timings).at(0);
}

}  // namespace mminfer::pipelines
