#include "serve/served_model.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "core/parallel.h"
#include "modal/audio/load.h"
#include "modal/image/image.h"
#include "pipelines/clip/clip_pipeline.h"
#include "pipelines/embedding_accuracy.h"
#include "pipelines/generation/generative_folder.h"
#include "pipelines/manifest.h"
#include "pipelines/staged/stage_json.h"
#include "serve/embedding_dimensions.h"
#include "serve/folder_digest.h"
#include "serve/sha256.h"

namespace mminfer::serve {

namespace fs = std::filesystem;

const char* kserve_datatype(DType t) {
  switch (t) {
    case DType::kBool: return "BOOL";
    case DType::kUint8: return "UINT8";
    case DType::kUint16: return "UINT16";
    case DType::kUint32: return "UINT32";
    case DType::kUint64: return "UINT64";
    case DType::kInt8: return "INT8";
    case DType::kInt16: return "INT16";
    case DType::kInt32: return "INT32";
    case DType::kInt64: return "INT64";
    case DType::kFloat16: return "FP16";
    case DType::kFloat32: return "FP32";
    case DType::kFloat64: return "FP64";
    case DType::kBFloat16: return "BF16";
    default: return "";
  }
}

namespace {

// Runs fn on each item, catching its Error into that item's result: one bad input (a corrupt
// image) fails alone, never the batch it shares.
template <class In, class Out, class Fn>
std::vector<typename BatchQueue<In, Out>::Result> per_item(std::vector<In>& inputs, Fn fn) {
  std::vector<typename BatchQueue<In, Out>::Result> out(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    try {
      out[i].value = fn(inputs[i]);
    } catch (const std::exception& e) {
      out[i].error = e.what();
    }
  }
  return out;
}

// Decodes each encoded image; one that fails gets its error in `out` (the item's result) and is
// left out, so the rest still run as one batch. Returns the images and the items they came from.
template <class Result>
std::pair<std::vector<image::Image>, std::vector<size_t>> decode_each(const std::vector<Bytes>& encoded,
                                                                      std::vector<Result>& out,
                                                                      const image::DecodeOptions& options) {
  std::vector<std::optional<image::Image>> each(encoded.size());
  parallel_each(static_cast<int64_t>(encoded.size()), [&](int64_t i) {
    try {
      each[i] = image::decode_image(encoded[i], options);
    } catch (const std::exception& e) {
      out[i].error = e.what();
    }
  });
  std::pair<std::vector<image::Image>, std::vector<size_t>> decoded;
  for (size_t i = 0; i < each.size(); ++i)
    if (each[i]) {
      decoded.first.push_back(std::move(*each[i]));
      decoded.second.push_back(i);
    }
  return decoded;
}

nlohmann::json tensor_meta(const ValueInfo& v) {
  nlohmann::json dims = nlohmann::json::array();
  for (int64_t d : v.dims) dims.push_back(d);
  const char* dt = kserve_datatype(v.dtype);
  return {{"name", v.name}, {"datatype", *dt ? dt : dtype_name(v.dtype)}, {"shape", dims}};
}

}  // namespace

std::optional<ServedModel::EncoderInputs> ServedModel::encoder_inputs() const {
  EncoderInputs n;
  if (generator_ && generator_->image_features()) {
    n.encoded = generator_->image_features()->encoded, n.cached = generator_->image_features()->reused;
    return n;
  }
  if (speech_.empty()) return std::nullopt;
  for (const auto& s : speech_) n.encoded += s->features().counts().encoded, n.cached += s->features().counts().reused;
  return n;
}

ServedModel::ServedModel(std::string name, int version, const std::string& dir, const ModelConfig& config,
                         BatchObserver observer)
    : name_(std::move(name)), version_(version), config_(config) {
  created_ = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto observe_as = [this, observer](const char* queue) -> std::function<void(size_t, double, double)> {
    if (!observer) return {};
    return [this, observer, queue](size_t b, double q, double c) { observer(name_, queue, b, q, c); };
  };
  BatchPolicy one = config_.batching;  // queues whose work does not batch take one at a time
  one.max_batch_size = 1;
  one.preferred_batch_sizes.clear();
  one.max_queue_delay = std::chrono::microseconds(0);

  // A folder of model.onnx alone is a tensor model; one that also brings what generation reads
  // (config.json, tokenizer.json) or says so in pipeline.json is generative.
  const fs::path d(dir);
  const bool may_generate = fs::exists(d / "pipeline.json") || fs::exists(d / "config.json") || fs::exists(d / "tokenizer.json");
  const auto generative = may_generate ? pipelines::detect_generative_folder(dir) : std::nullopt;
  if (config_.prune_image_tokens > 0 && !(generative && generative->kind == pipelines::GenerativeKind::kVisionLanguage))
    throw Error("model '" + name_ + "': prune_image_tokens applies to vision-language models only");
  if (generative) {
    kind_ = pipelines::kind_name(generative->kind);
    const bool speech = generative->kind == pipelines::GenerativeKind::kSpeechToText;
    const bool vision_language = generative->kind == pipelines::GenerativeKind::kVisionLanguage;
    if (generative->kind != pipelines::GenerativeKind::kTextGeneration && !speech && !vision_language)
      throw Error(dir + ": serving " + kind_ + " models is not available yet (`mminfer " +
                  pipelines::kind_command(generative->kind) + "` runs it)");
    refuse_min_cosine();
    preprocess_id_ = sha256_hex(kind_ + "|" + dir + "|" + std::to_string(version_) + "|" + folder_digest(dir));
    if (!speech) {
      generator_ = std::make_unique<ServedGenerator>(dir, config_, vision_language, observe_as("image"));
      return;
    }
    // Each instance transcribes one file at a time; its windows already decode as one batch.
    using SpeechQueue = BatchQueue<TranscribeJob, pipelines::Transcript>;
    std::vector<SpeechQueue::RunBatch> runs;
    // One feature cache for every instance: a 30-second window heard before skips the encoder.
    auto heard = std::make_shared<pipelines::FeatureCache>(size_t{64} << 20);
    for (int k = 0; k < config_.instances; ++k) {
      speech_.push_back(std::make_unique<pipelines::SpeechToText>(dir, config_.session, config_.generation.kv_cache));
      speech_.back()->features().set_cache(heard);
      runs.push_back([this, stt = speech_.back().get()](std::vector<TranscribeJob>& in) {
        return per_item<TranscribeJob, pipelines::Transcript>(in, [this, stt](const TranscribeJob& job) {
          audio::LoadOptions load;
          load.sample_rate = stt->sample_rate();
          load.max_seconds = config_.limits.max_audio_seconds;
          return stt->transcribe(audio::load_audio(job.audio, load), job.options);
        });
      });
    }
    speech_q_ = std::make_unique<SpeechQueue>(one, std::move(runs), observe_as("speech"));
    return;
  }
  // A folder of the published PP-OCRv4 files is an ocr pipeline even without pipeline.json.
  bool ppocr_names = fs::is_regular_file(fs::path(dir) / "ch_PP-OCRv4_det_infer.onnx");
  if (pipelines::has_manifest(dir) || ppocr_names) {
    pipelines::Manifest m = pipelines::has_manifest(dir) ? pipelines::read_manifest(dir) : ocr::ocr_manifest(dir);
    kind_ = pipelines::type_name(m.type);
    preprocess_id_ = sha256_hex(kind_ + "|" + m.preprocess.dump() + "|" + dir + "|" + std::to_string(version_) + "|" +
                                folder_digest(dir));
    if (m.type == pipelines::PipelineType::kStaged) {
      refuse_min_cosine();
      std::vector<BatchQueue<Bytes, std::string>::RunBatch> runs;
      for (int k = 0; k < config_.instances; ++k) {
        stageds_.push_back(std::make_unique<staged::StagedPipeline>(m, config_.session));
        runs.push_back([this, p = stageds_.back().get()](std::vector<Bytes>& in) { return run_stages(*p, in); });
      }
      staged_q_ = std::make_unique<BatchQueue<Bytes, std::string>>(config_.batching, std::move(runs), observe_as("staged"));
      return;
    }
    if (m.type == pipelines::PipelineType::kOcr) {
      refuse_min_cosine();
      std::vector<BatchQueue<Bytes, std::vector<ocr::OcrLine>>::RunBatch> runs;
      for (int k = 0; k < config_.instances; ++k) {
        ocrs_.push_back(std::make_unique<ocr::OcrPipeline>(m, config_.session, ocr::ocr_options(m)));
        // Images of one batch share the recognizer's batches (their lines grouped by width).
        runs.push_back([this, ocr = ocrs_.back().get()](std::vector<Bytes>& in) { return read_lines(*ocr, in); });
      }
      ocr_q_ = std::make_unique<BatchQueue<Bytes, std::vector<ocr::OcrLine>>>(config_.batching, std::move(runs),
                                                                              observe_as("ocr"));
      return;
    }
    if (m.labels) labels_ = *m.labels;
    if (m.templates && !m.templates->empty()) templates_ = *m.templates;
    std::optional<pipelines::ProbeEmbeddings> reference = fp32_reference(m);
    for (int k = 0; k < config_.instances; ++k) embedders_.push_back(pipelines::open_embedder(m, config_.session));
    if (auto* clip = dynamic_cast<clip::ClipPipeline*>(embedders_[0].get())) logit_scale_ = clip->logit_scale();
    dimension_ = embedders_[0]->dimension();
    matryoshka_ = serve::matryoshka_dimensions(m.raw, m.path, dimension_);
    if (reference) check_accuracy(m, *reference);
  } else {
    std::string path = (fs::path(dir) / "model.onnx").string();
    if (!fs::is_regular_file(path)) throw Error(dir + ": holds neither pipeline.json nor model.onnx");
    kind_ = "onnx";
    refuse_min_cosine();
    using TensorQueue = BatchQueue<std::vector<NamedTensor>, std::vector<Tensor>>;
    std::vector<TensorQueue::RunBatch> runs;
    for (int k = 0; k < config_.instances; ++k) {
      std::unique_ptr<Session> session;
      Status st = Session::load(path, config_.session, &session);
      if (!st) throw Error(st.message());
      // No op of the engine consumes strings: say so at load, naming the input, rather than
      // advertise a BYTES input that every request would then fail on.
      for (const ValueInfo& v : session->inputs())
        if (v.dtype == DType::kString)
          throw Error(path + ": input '" + v.name + "' is a string tensor (BYTES); mminfer has no op that takes strings");
      sessions_.push_back(std::move(session));
      runs.push_back([session = sessions_.back().get()](std::vector<std::vector<NamedTensor>>& in) {
        return per_item<std::vector<NamedTensor>, std::vector<Tensor>>(in, [session](const std::vector<NamedTensor>& t) {
          std::vector<Tensor> out;
          Status s = session->run(t, &out);
          if (!s) throw Error(s.message());
          return out;
        });
      });
    }
    preprocess_id_ = sha256_hex("onnx|" + folder_digest(dir));
    tensor_q_ = std::make_unique<TensorQueue>(one, std::move(runs), observe_as("tensor"));
    return;
  }

  // One run per instance for each tower the pipeline has, each on its own copy of the pipeline.
  using BytesQueue = BatchQueue<Bytes, Embedding>;  // images and audio arrive as file bytes
  using TextQueue = BatchQueue<std::string, Embedding>;
  auto image_run = [this](pipelines::Embedder* embedder) -> BytesQueue::RunBatch {
    return [this, embedder](std::vector<Bytes>& in) {
      // Decode one by one (a corrupt file fails alone), then run the good ones as one batch.
      std::vector<BytesQueue::Result> out(in.size());
      auto [images, where] = decode_each(in, out, decode_options());
      if (!images.empty()) {
        std::vector<Embedding> e = embedder->embed_images(images);
        for (size_t k = 0; k < where.size(); ++k) out[where[k]].value = std::move(e[k]);
      }
      return out;
    };
  };
  auto text_run = [](pipelines::Embedder* embedder) -> TextQueue::RunBatch {
    return [embedder](std::vector<std::string>& in) {
      std::vector<Embedding> e = embedder->embed_texts(in);  // texts were checked before queueing
      std::vector<TextQueue::Result> out(in.size());
      for (size_t i = 0; i < in.size(); ++i) out[i].value = std::move(e[i]);
      return out;
    };
  };
  auto audio_run = [](pipelines::Embedder* embedder) -> BytesQueue::RunBatch {
    return [embedder](std::vector<Bytes>& in) {
      return per_item<Bytes, Embedding>(in, [embedder](const Bytes& b) {
        return std::move(embedder->embed_audio(std::span<const Bytes>(&b, 1)).at(0));
      });
    };
  };
  auto per_instance = [&](auto make_run) {
    std::vector<decltype(make_run(nullptr))> runs;
    for (const auto& owned : embedders_) runs.push_back(make_run(owned.get()));
    return runs;
  };
  const pipelines::Embedder& first = *embedders_[0];
  if (first.has_tower(Modality::kImage))
    image_q_ = std::make_unique<BytesQueue>(config_.batching, per_instance(image_run), observe_as("image"));
  if (first.has_tower(Modality::kText))
    text_q_ = std::make_unique<TextQueue>(config_.batching, per_instance(text_run), observe_as("text"));
  if (first.has_tower(Modality::kAudio))
    audio_q_ = std::make_unique<BytesQueue>(config_.batching, per_instance(audio_run), observe_as("audio"));
}

ServedModel::~ServedModel() {
  // Drain in the order requests may chain (classification waits on text after image).
  image_q_.reset();
  audio_q_.reset();
  text_q_.reset();
  ocr_q_.reset();
  staged_q_.reset();
  tensor_q_.reset();
  speech_q_.reset();
}

bool ServedModel::takes(Modality m) const {
  switch (m) {
    case Modality::kImage: return image_q_ != nullptr;
    case Modality::kText: return text_q_ != nullptr;
    case Modality::kAudio: return audio_q_ != nullptr;
  }
  return false;
}

void ServedModel::check_text(std::string_view text) const {
  if (embedders_.empty()) throw Error("model '" + name_ + "' takes no text");
  check_input_cost(Modality::kText, text, config_.limits);  // before tokenizing it
  embedders_[0]->check_text(text);
}

size_t ServedModel::text_tokens(std::string_view text) const {
  if (embedders_.empty()) throw Error("model '" + name_ + "' takes no text");
  check_input_cost(Modality::kText, text, config_.limits);  // before tokenizing it
  return embedders_[0]->text_tokens(text);
}

bool ServedModel::embed_image(Bytes encoded, EmbeddingDone done) {
  return image_q_ && image_q_->push(std::move(encoded), std::move(done));
}
bool ServedModel::embed_text(std::string text, EmbeddingDone done) {
  return text_q_ && text_q_->push(std::move(text), std::move(done));
}
bool ServedModel::embed_audio(Bytes encoded, EmbeddingDone done) {
  return audio_q_ && audio_q_->push(std::move(encoded), std::move(done));
}
std::vector<BatchResult<std::vector<ocr::OcrLine>>> ServedModel::read_lines(ocr::OcrPipeline& ocr,
                                                                          std::vector<Bytes>& encoded) {
  std::vector<BatchResult<std::vector<ocr::OcrLine>>> out(encoded.size());
  auto [images, decoded] = decode_each(encoded, out, decode_options());  // which items decoded; the others fail alone
  try {
    std::vector<std::vector<ocr::OcrLine>> lines = ocr.run_many(images);
    for (size_t k = 0; k < decoded.size(); ++k) out[decoded[k]].value = std::move(lines[k]);
  } catch (const std::exception&) {  // find the image at fault: each alone
    for (size_t k = 0; k < decoded.size(); ++k) {
      try {
        out[decoded[k]].value = ocr.run(images[k]);
      } catch (const std::exception& e) {
        out[decoded[k]].error = e.what();
      }
    }
  }
  return out;
}

std::vector<BatchResult<std::string>> ServedModel::run_stages(staged::StagedPipeline& pipeline, std::vector<Bytes>& encoded) {
  std::vector<BatchResult<std::string>> out(encoded.size());
  auto [images, decoded] = decode_each(encoded, out, decode_options());
  // Every image draws as input 0 with seed 0: its stages depend on its bytes alone, as the
  // result cache that may answer it next time assumes.
  const std::vector<uint64_t> ids(images.size(), 0);
  auto answer = [&](size_t k, const std::vector<staged::StageRun>& runs) {
    out[decoded[k]].value = staged::stages_json(pipeline.config(), runs).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  try {
    std::vector<std::vector<staged::StageRun>> runs = pipeline.run_images(images, 0, ids);
    for (size_t k = 0; k < decoded.size(); ++k) answer(k, runs[k]);
  } catch (const std::exception&) {  // find the image at fault: each alone
    for (size_t k = 0; k < decoded.size(); ++k) {
      try {
        answer(k, pipeline.run_images({&images[k], 1}, 0, {&ids[k], 1})[0]);
      } catch (const std::exception& e) {
        out[decoded[k]].error = e.what();
      }
    }
  }
  return out;
}

bool ServedModel::run_staged(Bytes encoded, StagedDone done) {
  return staged_q_ && staged_q_->push(std::move(encoded), std::move(done));
}

bool ServedModel::ocr(Bytes encoded, OcrDone done) { return ocr_q_ && ocr_q_->push(std::move(encoded), std::move(done)); }
bool ServedModel::transcribe(TranscribeJob job, TranscriptDone done) {
  return speech_q_ && speech_q_->push(std::move(job), std::move(done));
}

bool ServedModel::infer(std::vector<NamedTensor> inputs, TensorsDone done) {
  return tensor_q_ && tensor_q_->push(std::move(inputs), std::move(done));
}

size_t ServedModel::queued() const {
  return sum_over_queues([](const auto& q) { return q.depth(); }) + (generator_ ? generator_->waiting() : 0);
}

size_t ServedModel::in_flight() const {
  return sum_over_queues([](const auto& q) { return q.in_flight(); }) +
         (generator_ ? generator_->waiting() + generator_->running() : 0);
}

const std::vector<ValueInfo>& ServedModel::input_info() const {
  static const std::vector<ValueInfo> none;
  return sessions_.empty() ? none : sessions_[0]->inputs();
}
const std::vector<ValueInfo>& ServedModel::output_info() const {
  static const std::vector<ValueInfo> none;
  return sessions_.empty() ? none : sessions_[0]->outputs();
}

std::vector<std::pair<const char*, size_t>> ServedModel::chosen_batch_sizes() const {
  std::vector<std::pair<const char*, size_t>> out;
  if (image_q_) out.emplace_back("image", image_q_->controller().chosen());
  if (text_q_) out.emplace_back("text", text_q_->controller().chosen());
  if (audio_q_) out.emplace_back("audio", audio_q_->controller().chosen());
  return out;
}

image::DecodeOptions ServedModel::decode_options() const {
  image::DecodeOptions o;
  o.max_pixels = config_.limits.max_image_pixels;  // what the header check missed (GIF frames)
  return o;
}

void ServedModel::refuse_min_cosine() const {
  if (config_.min_cosine > 0)
    throw Error("model '" + name_ + "': min_cosine bounds embedding pipelines (clip, audio-encoder) only; this is an " +
                kind_ + " model");
}

std::optional<pipelines::ProbeEmbeddings> ServedModel::fp32_reference(const pipelines::Manifest& manifest) const {
  if (!config_.session.precision.any_below_fp32() && config_.session.merge_tokens == 0) {
    if (config_.min_cosine > 0)
      std::fprintf(stderr, "mminfer serve: model '%s' runs in FP32; min_cosine has nothing to bound\n", name_.c_str());
    return std::nullopt;
  }
  SessionOptions fp32 = config_.session;
  fp32.precision = PrecisionPolicy{};
  fp32.merge_tokens = 0;
  return pipelines::embed_probes(manifest, *pipelines::open_embedder(manifest, fp32), labels_);
}

void ServedModel::check_accuracy(const pipelines::Manifest& manifest, const pipelines::ProbeEmbeddings& reference) {
  accuracy_ = pipelines::compare_probes(pipelines::embed_probes(manifest, *embedders_[0], labels_), reference);
  const std::string spec = precision_spec(config_.session.precision) +
                           (config_.session.merge_tokens > 0
                                ? ", " + std::to_string(config_.session.merge_tokens) + " tokens merged per block"
                                : "");
  pipelines::require_accuracy(accuracy_, config_.min_cosine,
                              "model '" + name_ + "' version " + std::to_string(version_), spec);
  std::string figures;
  for (const pipelines::TowerAccuracy& t : accuracy_) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s%s %.6f (%zu probes)", figures.empty() ? "" : ", ",
                  pipelines::modality_name(t.modality), t.min_cosine, t.probes);
    figures += buf;
  }
  std::fprintf(stderr, "mminfer serve: model '%s' version %d in %s: lowest cosine to FP32 %s\n", name_.c_str(),
               version_, spec.c_str(), figures.c_str());
}

std::string ServedModel::platform() const { return sessions_.empty() ? "mminfer_pipeline" : "onnx_onnxv1"; }

PipelineSignature ServedModel::pipeline_signature() const {
  PipelineSignature sig;
  if (!stageds_.empty()) {
    sig.inputs.push_back({"image", "BYTES", {-1}, true});
    sig.outputs.push_back({"stages", "BYTES", {-1}});  // per image, JSON: {stage: {"ran", "result", "confidence"}}
  } else if (!ocrs_.empty()) {
    sig.inputs.push_back({"image", "BYTES", {1}, true});
    sig.outputs.push_back({"text", "BYTES", {-1}});   // each line's text, in reading order
    sig.outputs.push_back({"lines", "BYTES", {-1}});  // each line as JSON: {"text", "score", "box"}
  } else if (!embedders_.empty()) {
    for (auto [m, q] : {std::pair{Modality::kImage, image_q_ != nullptr}, {Modality::kText, text_q_ != nullptr},
                        {Modality::kAudio, audio_q_ != nullptr}}) {
      if (!q) continue;
      std::string name = pipelines::modality_name(m);
      sig.inputs.push_back({name, "BYTES", {-1}, m != Modality::kText});
      sig.outputs.push_back({name + "_embedding", "FP32", {-1, -1}});
    }
  }
  return sig;
}

nlohmann::json ServedModel::metadata() const {
  nlohmann::json j = {{"name", name_}, {"versions", {std::to_string(version_)}}, {"platform", platform()}};
  nlohmann::json inputs = nlohmann::json::array(), outputs = nlohmann::json::array();
  if (!sessions_.empty()) {
    for (const ValueInfo& v : sessions_[0]->inputs()) inputs.push_back(tensor_meta(v));
    for (const ValueInfo& v : sessions_[0]->outputs()) outputs.push_back(tensor_meta(v));
  } else {
    PipelineSignature sig = pipeline_signature();
    for (const TensorSpec& t : sig.inputs) inputs.push_back({{"name", t.name}, {"datatype", t.datatype}, {"shape", t.dims}});
    for (const TensorSpec& t : sig.outputs) outputs.push_back({{"name", t.name}, {"datatype", t.datatype}, {"shape", t.dims}});
  }
  j["inputs"] = inputs;
  j["outputs"] = outputs;
  if (config_.session.precision.any_below_fp32()) {
    j["precision"] = precision_spec(config_.session.precision);
    nlohmann::json towers = nlohmann::json::object();
    for (const pipelines::TowerAccuracy& t : accuracy_)
      towers[pipelines::modality_name(t.modality)] = {{"min_cosine_to_fp32", t.min_cosine}, {"probes", t.probes}};
    if (!towers.empty()) j["accuracy"] = towers;
  }
  return j;
}

}  // namespace mminfer::serve

namespace mminfer::serve {

nlohmann::json ServedModel::triton_config() const {
  // Request shapes are whole shapes (as metadata gives them), so max_batch_size is 0 in Triton's
  // terms; pipelines still batch elements across requests, which dynamic_batching describes.
  auto config_tensor = [](const std::string& name, const std::string& datatype, const std::vector<int64_t>& dims) {
    return nlohmann::json{{"name", name}, {"data_type", "TYPE_" + (datatype == "BYTES" ? std::string("STRING") : datatype)}, {"dims", dims}};
  };
  nlohmann::json in = nlohmann::json::array(), out = nlohmann::json::array();
  if (!sessions_.empty()) {
    for (const ValueInfo& v : sessions_[0]->inputs()) in.push_back(config_tensor(v.name, kserve_datatype(v.dtype), v.dims));
    for (const ValueInfo& v : sessions_[0]->outputs()) out.push_back(config_tensor(v.name, kserve_datatype(v.dtype), v.dims));
  } else {
    PipelineSignature sig = pipeline_signature();
    for (const TensorSpec& t : sig.inputs) {
      nlohmann::json c = config_tensor(t.name, t.datatype, t.dims);
      c["optional"] = sig.inputs.size() > 1;  // a clip request may give images, texts or both
      in.push_back(std::move(c));
    }
    for (const TensorSpec& t : sig.outputs) out.push_back(config_tensor(t.name, t.datatype, t.dims));
  }
  nlohmann::json j = {{"name", name_},
                      {"platform", platform()},
                      {"backend", "mminfer"},
                      {"max_batch_size", 0},
                      {"input", in},
                      {"output", out},
                      {"version_policy", {{"specific", {{"versions", {version_}}}}}},
                      {"instance_group", {{{"count", config_.instances}, {"kind", "KIND_CPU"}}}}};
  if (sessions_.empty()) {  // tensor models run one request at a time
    const BatchPolicy& b = config_.batching;
    nlohmann::json d = {{"max_queue_delay_microseconds", b.max_queue_delay.count()},
                        {"default_queue_policy", {{"max_queue_size", b.capacity}}}};
    d["preferred_batch_size"] = b.preferred_batch_sizes;
    j["dynamic_batching"] = std::move(d);
    // Triton's free-form parameters: how many elements (images, texts) one run may take.
    j["parameters"] = {{"max_elements_per_batch", {{"string_value", std::to_string(b.max_batch_size)}}}};
  }
  return j;
}

}  // namespace mminfer::serve
