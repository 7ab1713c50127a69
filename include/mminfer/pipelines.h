// Pipelines: a folder of ONNX models and a pipeline.json, raw inputs in (encoded images, UTF-8
// texts, audio files), what a person wants out (text lines, embeddings, label probabilities).
// Folder formats are described in the project's docs/ARCHITECTURE.md.
//
// Thread safety as for Session: every method may be called from several threads at once; calls
// on one pipeline run one after another.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mminfer/session.h"
#include "mminfer/status.h"

namespace mminfer {

// Encoded file bytes (JPEG, PNG, BMP, GIF, WebP for images; WAV, FLAC, OGG... for audio).
using Bytes = std::vector<uint8_t>;

// One line of text found in an image: its four corners (x, y) clockwise from the top left, in
// the image's pixels.
struct TextLine {
  std::string text;
  float score = 0;  // recognition confidence in [0, 1]
  std::array<std::array<float, 2>, 4> box{};
};

class Ocr {
 public:
  virtual ~Ocr() = default;
  // `dir` holds a pipeline.json of type "ocr", or the PP-OCRv4 files under their published names.
  // options.threads, precision and opt_level apply to each of its models.
  static Status open(const std::string& dir, const SessionOptions& options, std::unique_ptr<Ocr>* out);
  // Lines of one image in reading order.
  virtual Status read(const Bytes& image, std::vector<TextLine>* lines) = 0;
  // Several images at once (their lines share recognizer batches); lines[i] belongs to images[i].
  // One undecodable image fails the call and names its index.
  virtual Status read(const std::vector<Bytes>& images, std::vector<std::vector<TextLine>>* lines) = 0;
};

using Embedding = std::vector<float>;  // unit length

struct LabelProbability {
  std::string label;
  float probability = 0;
};

// Pipelines with towers into one embedding space: "clip" (images and texts) and
// "audio-encoder" (audio).
class Embedder {
 public:
  virtual ~Embedder() = default;
  static Status open(const std::string& dir, const SessionOptions& options, std::unique_ptr<Embedder>* out);

  virtual std::string type() const = 0;  // the pipeline.json type: "clip", "audio-encoder"
  virtual bool has_images() const = 0;
  virtual bool has_texts() const = 0;
  virtual bool has_audio() const = 0;
  // One unit embedding per input, in input order. A pipeline without the tower, an input that
  // does not decode, or a text that is not UTF-8 fails the call with a one-line message.
  virtual Status embed_images(const std::vector<Bytes>& images, std::vector<Embedding>* out) = 0;
  virtual Status embed_texts(const std::vector<std::string>& texts, std::vector<Embedding>* out) = 0;
  virtual Status embed_audio(const std::vector<Bytes>& clips, std::vector<Embedding>* out) = 0;
  // Zero-shot classification (clip only): per image, every label's probability, highest first.
  // Empty templates: the folder's templates, else "{}" (the label alone).
  virtual Status classify(const std::vector<Bytes>& images, const std::vector<std::string>& labels,
                          const std::vector<std::string>& templates,
                          std::vector<std::vector<LabelProbability>>* out) = 0;
};

}  // namespace mminfer
