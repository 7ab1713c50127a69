// One version of one model of the repository, loaded and ready: a plain ONNX model (tensors in,
// tensors out), a pipeline folder (ocr, clip, audio-encoder, staged) or a text-generation folder (served
// with continuous batching, served_generator.h). Each modality it takes has its
// own BatchQueue and worker, so image and text requests of a CLIP pipeline batch separately
// and run at the same time on their own towers.
//
// Unloading a version never fails the requests it already accepted: destruction drains the
// queues first (they are declared after what they run). The `done` callbacks must not hold a
// shared_ptr to the model: the last owner would then be a queue worker destroying its own queue.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mminfer/session.h"
#include "modal/image/image.h"
#include "pipelines/embedder.h"
#include "pipelines/embedding_accuracy.h"
#include "pipelines/generation/speech_to_text.h"
#include "pipelines/ocr/ocr_pipeline.h"
#include "pipelines/staged/staged_pipeline.h"
#include "serve/batch_queue.h"
#include "serve/kserve_bytes.h"
#include "serve/model_config.h"
#include "serve/served_generator.h"

namespace mminfer::serve {

using Bytes = std::vector<uint8_t>;
using pipelines::Embedding;
using pipelines::Modality;

// Told after every batch, for the metrics.
// One audio file to transcribe, with its options (language, timestamps).
struct TranscribeJob {
  std::vector<uint8_t> audio;
  pipelines::TranscribeOptions options;
};

using BatchObserver = std::function<void(const std::string& model, const char* queue, size_t batch, double queue_ms,
                                         double compute_ms)>;

class ServedModel {
 public:
  // `dir` is the version folder: model.onnx, or a pipeline folder with pipeline.json.
  // Throws Error naming what is wrong.
  ServedModel(std::string name, int version, const std::string& dir, const ModelConfig& config, BatchObserver observer);
  ~ServedModel();

  const std::string& name() const { return name_; }
  int version() const { return version_; }
  const std::string& kind() const { return kind_; }  // "onnx", "ocr", "clip", "audio-encoder", "staged", "text-generation"
  const ModelConfig& config() const { return config_; }
  // A digest of what turns raw bytes into results (the manifest's preprocess section and the
  // contents of every file of the version folder, read once at load): part of every cache key,
  // so neither a new version nor changed files reloaded as the same version reuse old results.
  const std::string& preprocess_id() const { return preprocess_id_; }
  nlohmann::json metadata() const;  // KServe v2 model metadata
  // Triton's model configuration (GET /v2/models/{m}/config): the same inputs and outputs.
  nlohmann::json triton_config() const;
  // "onnx_onnxv1" for ONNX models (the KServe v2 format name), "mminfer_pipeline" for pipelines.
  std::string platform() const;
  // Pipelines: the BYTES inputs and FP32 / BYTES outputs /v2 infer takes and gives (empty for
  // tensor models). Metadata and config advertise exactly this.
  PipelineSignature pipeline_signature() const;

  bool takes(Modality m) const;
  bool is_ocr() const { return !ocrs_.empty(); }
  bool is_staged() const { return !stageds_.empty(); }
  bool is_tensor_model() const { return !sessions_.empty(); }
  const pipelines::Embedder* embedder() const { return embedders_.empty() ? nullptr : embedders_[0].get(); }
  ServedGenerator* generator() const { return generator_.get(); }  // null unless text-generation
  bool transcribes() const { return speech_q_ != nullptr; }         // a speech-to-text folder
  // Encoder inputs of a speech-to-text or vision-language model so far: those the encoder ran
  // on, and those its feature cache answered.
  struct EncoderInputs {
    uint64_t encoded = 0, cached = 0;
  };
  std::optional<EncoderInputs> encoder_inputs() const;
  // The image decoder's options under this model's limits.
  image::DecodeOptions decode_options() const;
  // Throws Error unless the folder has Whisper's timestamp tokens (segments, srt, vtt).
  void require_timestamps() const { speech_.at(0)->require_timestamps(); }

  using EmbeddingDone = std::function<void(BatchResult<Embedding>)>;
  using OcrDone = std::function<void(BatchResult<std::vector<ocr::OcrLine>>)>;
  using TensorsDone = std::function<void(BatchResult<std::vector<Tensor>>)>;
  using TranscriptDone = std::function<void(BatchResult<pipelines::Transcript>)>;
  using StagedDone = std::function<void(BatchResult<std::string>)>;  // the stages as JSON

  // Each returns false, without calling `done`, when that queue is full.
  bool embed_image(Bytes encoded, EmbeddingDone done);
  bool embed_text(std::string text, EmbeddingDone done);
  bool embed_audio(Bytes encoded, EmbeddingDone done);
  bool ocr(Bytes encoded, OcrDone done);
  bool run_staged(Bytes encoded, StagedDone done);
  bool infer(std::vector<NamedTensor> inputs, TensorsDone done);
  bool transcribe(TranscribeJob job, TranscriptDone done);

  // Tensor models: the session's inputs and outputs (empty for pipelines).
  const std::vector<ValueInfo>& input_info() const;
  const std::vector<ValueInfo>& output_info() const;
  // Clip pipelines: the manifest's labels and templates ({"{}"} when it has none), logit scale.
  const std::vector<std::string>& default_labels() const { return labels_; }
  const std::vector<std::string>& default_templates() const { return templates_; }
  float logit_scale() const { return logit_scale_; }

  // Throws Error for a text the text tower would refuse (too long, invalid UTF-8), and
  // InputTooLarge for one over config.json's max_text_bytes, before tokenizing it.
  void check_text(std::string_view text) const;
  // check_text, then the tokens the text tower reads for it (special tokens in, padding out).
  size_t text_tokens(std::string_view text) const;
  // Embedding pipelines: an embedding's length when the model declares it (0: unknown), and the
  // shorter lengths it was trained to give (pipeline.json matryoshka_dimensions, see
  // embedding_dimensions.h).
  size_t dimension() const { return dimension_; }
  const std::vector<size_t>& matryoshka_dimensions() const { return matryoshka_; }
  // When this version was loaded, in seconds since 1970 (OpenAI's model `created`).
  int64_t created() const { return created_; }
  size_t queued() const;     // waiting in the model's queues
  size_t in_flight() const;  // accepted and not yet answered: waiting plus running
  // Per queue ("image", "text", ...): the batch size its controller picked last.
  std::vector<std::pair<const char*, size_t>> chosen_batch_sizes() const;

 private:
  // f(queue) summed over the model's queues.
  template <class F>
  size_t sum_over_queues(F f) const {
    size_t n = 0;
    if (image_q_) n += f(*image_q_);
    if (text_q_) n += f(*text_q_);
    if (audio_q_) n += f(*audio_q_);
    if (ocr_q_) n += f(*ocr_q_);
    if (staged_q_) n += f(*staged_q_);
    if (tensor_q_) n += f(*tensor_q_);
    if (speech_q_) n += f(*speech_q_);
    return n;
  }
  // Throws Error when config.json sets min_cosine on a model it cannot bound (ocr, onnx).
  void refuse_min_cosine() const;
  // Below FP32: the probes' embeddings by the pipeline in FP32, made before the served copies
  // open and that FP32 copy closed, so load never holds both. None at FP32.
  std::optional<pipelines::ProbeEmbeddings> fp32_reference(const pipelines::Manifest& manifest) const;
  // Measures each tower of the served copy against `reference`, logs the figures, and throws
  // Error when one falls below min_cosine.
  void check_accuracy(const pipelines::Manifest& manifest, const pipelines::ProbeEmbeddings& reference);
  // One OCR batch: images that do not decode fail alone; the rest are read together.
  std::vector<BatchResult<std::vector<ocr::OcrLine>>> read_lines(ocr::OcrPipeline& ocr, std::vector<Bytes>& encoded);
  // One staged batch, the same way: each image's stages as JSON.
  std::vector<BatchResult<std::string>> run_stages(staged::StagedPipeline& pipeline, std::vector<Bytes>& encoded);

  std::string name_;
  int version_;
  std::string kind_;
  ModelConfig config_;
  std::string preprocess_id_;
  std::vector<std::string> labels_, templates_{"{}"};
  float logit_scale_ = 0;
  size_t dimension_ = 0;
  std::vector<size_t> matryoshka_;
  int64_t created_ = 0;
  std::vector<pipelines::TowerAccuracy> accuracy_;  // of a pipeline below FP32, measured at load
  // One per instance (config.json "instances"); only one of the three is used.
  std::vector<std::unique_ptr<Session>> sessions_;
  std::vector<std::unique_ptr<ocr::OcrPipeline>> ocrs_;
  std::vector<std::unique_ptr<staged::StagedPipeline>> stageds_;
  std::vector<std::unique_ptr<pipelines::Embedder>> embedders_;
  std::vector<std::unique_ptr<pipelines::SpeechToText>> speech_;
  // Last: destroyed first, so they drain while what they run still exists.
  std::unique_ptr<BatchQueue<Bytes, Embedding>> image_q_;
  std::unique_ptr<BatchQueue<std::string, Embedding>> text_q_;
  std::unique_ptr<BatchQueue<Bytes, Embedding>> audio_q_;
  std::unique_ptr<BatchQueue<Bytes, std::vector<ocr::OcrLine>>> ocr_q_;
  std::unique_ptr<BatchQueue<Bytes, std::string>> staged_q_;
  std::unique_ptr<BatchQueue<std::vector<NamedTensor>, std::vector<Tensor>>> tensor_q_;
  std::unique_ptr<BatchQueue<TranscribeJob, pipelines::Transcript>> speech_q_;
  std::unique_ptr<ServedGenerator> generator_;
};

// The KServe datatype name of a dtype ("FP32", "INT64", ...), "" when it has none.
const char* kserve_datatype(DType t);

}  // namespace mminfer::serve
