// PP-OCR end to end: detection (DB), direction classification, recognition (CTC), returning
// text lines with boxes and scores in reading order.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "mminfer/session.h"
#include "pipelines/manifest.h"
#include "pipelines/ocr/crop.h"
#include "pipelines/ocr/ctc.h"
#include "pipelines/ocr/db_postprocess.h"

namespace mminfer::ocr {

struct OcrLine {
  std::string text;
  float score = 0;
  Quad box;
};

struct OcrOptions {
  int det_max_side = 960;     // longer side limit for the detector's input
  DbParams db;
  bool use_classifier = true;
  float cls_threshold = 0.9f;  // confidence needed to turn a line 180°
  float drop_score = 0.5f;     // lines recognised with less confidence are left out
  int rec_batch = 8;           // lines per recognizer run (grouped by aspect ratio)
  // Models (det, cls, rec) that run FP32 whatever precision the session asks for. The
  // recognizer picks each character as the largest of 6625 logits, and INT8 moves its near-ties
  // (a space or none, ¥ or ￥): on the 210-image evaluation set 3.7% of lines changed (CER no
  // worse), against 1.1% with the detector and classifier alone in INT8. So it stays FP32 unless
  // asked ("" quantizes every model).
  std::string fp32_models = "rec";
  // Cheap path first: above 0, every line is read by an INT8 copy of the recognizer, and a line
  // whose mean CTC confidence is below this threshold is read again by the recognizer as the
  // session loads it (FP32 unless asked otherwise), whose reading stands. A line read as nothing
  // (confidence 0) is always read again.
  float cascade_threshold = 0;
  // The folder's precision (a --precision spec, e.g. "int8"), used when the session asks for
  // none; "" leaves the session's.
  std::string precision;
};

// What the cascade did so far: lines read, and those read again by the full recognizer.
struct CascadeCounts {
  size_t lines = 0, escalated = 0;
};

// The roles fp32_models may name, checked: "det", "cls", "rec", comma-separated.
std::vector<std::string> parse_model_roles(const std::string& list);

// The manifest of an OCR folder: its pipeline.json (type "ocr", files det, rec, keys and
// optionally cls), or, in a folder without one, the PP-OCRv4 files by the names the models
// are published under: ch_PP-OCRv4_det_infer.onnx, ch_PP-OCRv4_rec_infer.onnx,
// ppocr_keys_v1.txt and, when present, ch_ppocr_mobile_v2.0_cls_infer.onnx.
pipelines::Manifest ocr_manifest(const std::string& dir);
// `defaults` with the manifest's preprocess keys over them: det_max_side, det_threshold,
// box_threshold, unclip_ratio, use_cls, cls_threshold, drop_score, rec_batch, fp32_models,
// cascade_threshold, precision.
OcrOptions ocr_options(const pipelines::Manifest& manifest, OcrOptions defaults = {});

// PP-OCR models read BGR.
Image to_bgr(const Image& rgb);
// The detector's input for a BGR image: resized so the longer side is at most `max_side`, both
// sides to multiples of 32, padded to the side buckets the detector is run at, normalized
// (ImageNet mean and std). h x w: the part of it the image covers.
struct DetInput {
  Tensor x;
  int h, w;
};
DetInput det_input(const Image& bgr, int max_side);

class OcrPipeline {
 public:
  // Throws Error naming the file or key at fault. Options are taken as given (see ocr_options).
  OcrPipeline(const pipelines::Manifest& manifest, const SessionOptions& session, OcrOptions options = {});
  OcrPipeline(const std::string& dir, const SessionOptions& session, OcrOptions options = {})
      : OcrPipeline(ocr_manifest(dir), session, options) {}
  // `rgb` is an 8-bit, 3-channel RGB image.
  std::vector<OcrLine> run(const Image& rgb);
  // Several images at once: each is detected alone, then the crops of all of them go through the
  // classifier and the recognizer together, so lines from different images share batches of
  // their width bucket. The lines of image i are element i: the lines run() reads image by
  // image (a crop may be padded to another width in another batch, so scores can differ a little).
  std::vector<std::vector<OcrLine>> run_many(std::span<const Image> rgbs);
  const CascadeCounts& cascade_counts() const { return cascade_; }

 private:
  std::vector<DetectedBox> detect(const Image& bgr);
  // Turns the crops the classifier finds upside down; returns their indices.
  std::vector<size_t> orient(std::vector<Image>& crops);
  std::vector<Decoded> recognize(const std::vector<Image>& crops, Session& model);
  // Through the cascade when there is one: the light recognizer, then the full one for the lines
  // it is unsure of.
  std::vector<Decoded> read(const std::vector<Image>& crops);

  OcrOptions options_;
  std::unique_ptr<Session> det_, cls_, rec_, rec_light_;
  CascadeCounts cascade_;
  std::vector<std::string> charset_;
};

}  // namespace mminfer::ocr
