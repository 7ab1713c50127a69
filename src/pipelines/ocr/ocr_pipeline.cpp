#include "pipelines/ocr/ocr_pipeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "core/ascii.h"
#include "modal/image/resize.h"
#include "pipelines/ocr/ctc.h"

namespace mminfer::ocr {

namespace {

std::unique_ptr<Session> open_model(const std::string& path, const SessionOptions& opts) {
  std::unique_ptr<Session> s;
  Status st = Session::load(path, opts, &s);
  if (!st) throw Error(st.message());
  return s;
}


// Writes img into the top-left of dst ([3, h_pad, w_pad], already zeroed) as
// (x/255 - mean[c]) / std[c], CHW.
void normalize_into(const Image& img, float* dst, int w_pad, int h_pad, const float mean[3], const float std[3]) {
  size_t plane = static_cast<size_t>(h_pad) * w_pad;
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x)
      for (int c = 0; c < 3; ++c)
        dst[c * plane + static_cast<size_t>(y) * w_pad + x] =
            (img.pixels[(static_cast<size_t>(y) * img.width + x) * 3 + c] / 255.f - mean[c]) / std[c];
}

// Input shapes come from a small fixed set, padded up to it: the engine builds a plan (and
// oneDNN its convolution kernels) once per shape, hundreds of milliseconds for these models,
// so a stream of images of every size would otherwise pay that on nearly every image.
int round_up(int v, int m) { return (v + m - 1) / m * m; }
// Detector sides (multiples of 32): finer steps for small sides, where padding costs most.
int det_side_bucket(int v) { return v <= 256 ? round_up(v, 32) : v <= 512 ? round_up(v, 64) : round_up(v, 128); }
// Line widths: from 320 in steps of a quarter, multiples of 32.
int line_width_bucket(int need) {
  int w = 320;
  while (w < need) w = round_up(w + w / 4, 32);
  return w;
}
// Lines per batch: a power of two, or the batch limit itself.
size_t batch_bucket(size_t n, size_t limit) {
  size_t b = 1;
  while (b < n) b *= 2;
  return std::min(b, std::max(limit, n));
}

std::vector<Tensor> run_model(Session& s, const Tensor& x) {
  std::vector<Tensor> out;
  Status st = s.run({{s.inputs()[0].name, x}}, &out);
  if (!st) throw Error(st.message());
  return out;
}

// Lines are 48 pixels tall for the classifier and the recognizer, normalized to [-1, 1].
constexpr float kHalf[3] = {0.5f, 0.5f, 0.5f};

// A batch [rows, 3, 48, width] of crops resized to height 48 (width by aspect, at most
// `width`); rows past the crops stay blank.
Tensor line_batch(const std::vector<const Image*>& crops, int width, size_t rows) {
  Tensor t = Tensor::empty(DType::kFloat32, {static_cast<int64_t>(rows), 3, 48, width});
  std::fill_n(t.data<float>(), t.numel(), 0.f);
  for (size_t i = 0; i < crops.size(); ++i) {
    const Image& c = *crops[i];
    double ratio = static_cast<double>(c.width) / std::max(1, c.height);
    int w = std::clamp(static_cast<int>(std::ceil(48 * ratio)), 1, width);
    normalize_into(image::resize(c, w, 48, image::ResizeFilter::kBicubic), t.data<float>() + i * 3 * 48 * width, width, 48,
                   kHalf, kHalf);
  }
  return t;
}

}  // namespace

pipelines::Manifest ocr_manifest(const std::string& dir) {
  namespace fs = std::filesystem;
  if (pipelines::has_manifest(dir)) return pipelines::read_manifest(dir);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(dir + ": no such pipeline folder");
  pipelines::Manifest m;
  m.dir = dir;
  m.path = (fs::path(dir) / pipelines::kManifestName).string();
  m.type = pipelines::PipelineType::kOcr;
  const std::pair<const char*, const char*> names[] = {{"det", "ch_PP-OCRv4_det_infer.onnx"},
                                                       {"rec", "ch_PP-OCRv4_rec_infer.onnx"},
                                                       {"keys", "ppocr_keys_v1.txt"},
                                                       {"cls", "ch_ppocr_mobile_v2.0_cls_infer.onnx"}};
  for (const auto& [role, name] : names) {
    std::string p = (fs::path(dir) / name).string();
    if (fs::is_regular_file(p, ec)) m.files[role] = p;
    else if (std::string(role) != "cls") throw Error("the OCR pipeline needs " + p + " (or a pipeline.json naming its files)");
  }
  return m;
}

OcrOptions ocr_options(const pipelines::Manifest& m, OcrOptions o) {
  const char* pre = "preprocess";
  auto in_range = [&](const char* key, double v, double lo, double hi) {
    if (!(v >= lo && v <= hi)) {
      char range[64];
      std::snprintf(range, sizeof range, "must be between %g and %g", lo, hi);
      throw Error(m.key_error(pre, key, range));
    }
    return v;
  };
  o.det_max_side = static_cast<int>(in_range("det_max_side", static_cast<double>(m.integer(pre, "det_max_side", o.det_max_side)), 32, 8192));
  o.db.threshold = static_cast<float>(in_range("det_threshold", m.number(pre, "det_threshold", o.db.threshold), 0, 1));
  o.db.box_threshold = static_cast<float>(in_range("box_threshold", m.number(pre, "box_threshold", o.db.box_threshold), 0, 1));
  o.db.unclip_ratio = static_cast<float>(in_range("unclip_ratio", m.number(pre, "unclip_ratio", o.db.unclip_ratio), 0, 10));
  o.use_classifier = m.boolean(pre, "use_cls", o.use_classifier);
  o.cls_threshold = static_cast<float>(in_range("cls_threshold", m.number(pre, "cls_threshold", o.cls_threshold), 0, 1));
  o.drop_score = static_cast<float>(in_range("drop_score", m.number(pre, "drop_score", o.drop_score), 0, 1));
  o.rec_batch = static_cast<int>(in_range("rec_batch", static_cast<double>(m.integer(pre, "rec_batch", o.rec_batch)), 1, 256));
  o.fp32_models = m.string(pre, "fp32_models", o.fp32_models);
  o.cascade_threshold =
      static_cast<float>(in_range("cascade_threshold", m.number(pre, "cascade_threshold", o.cascade_threshold), 0, 1));
  o.precision = m.string(pre, "precision", o.precision);
  if (PrecisionPolicy check; !o.precision.empty())
    if (Status st = parse_precision(o.precision, &check); !st) throw Error(m.key_error(pre, "precision", st.message()));
  try {
    parse_model_roles(o.fp32_models);
  } catch (const Error& e) {
    throw Error(m.key_error(pre, "fp32_models", e.what()));
  }
  return o;
}

std::vector<std::string> parse_model_roles(const std::string& list) {
  if (list.empty()) return {};
  std::vector<std::string> roles = split_list(list);
  for (const std::string& role : roles)
    if (role != "det" && role != "cls" && role != "rec")
      throw Error("unknown model '" + role + "' (use det, cls, rec, comma-separated)");
  return roles;
}

OcrPipeline::OcrPipeline(const pipelines::Manifest& m, const SessionOptions& session, OcrOptions options)
    : options_(options) {
  if (m.type != pipelines::PipelineType::kOcr)
    throw Error(m.path + ": type is '" + pipelines::type_name(m.type) + "', not an ocr pipeline");
  std::vector<std::string> fp32 = parse_model_roles(options_.fp32_models);
  SessionOptions base = session;
  if (!options_.precision.empty() && !session.precision.any_below_fp32()) {
    if (Status st = parse_precision(options_.precision, &base.precision); !st) throw Error("precision: " + st.message());
  }
  auto options_for = [&](const char* role) {
    SessionOptions o = base;
    if (std::find(fp32.begin(), fp32.end(), role) != fp32.end()) o.precision = PrecisionPolicy{};
    return o;
  };
  det_ = open_model(m.file("det"), options_for("det"));
  rec_ = open_model(m.file("rec"), options_for("rec"));
  if (options_.cascade_threshold > 0) {
    SessionOptions light = base;
    light.precision = PrecisionPolicy{};
    light.precision.by_modality.fill(Precision::kInt8);
    rec_light_ = open_model(m.file("rec"), light);
  }
  charset_ = load_charset(m.file("keys"));
  if (options_.use_classifier && m.has_file("cls")) cls_ = open_model(m.file("cls"), options_for("cls"));
}

Image to_bgr(const Image& rgb) {
  Image bgr = rgb;
  for (size_t i = 0; i + 2 < bgr.pixels.size(); i += 3) std::swap(bgr.pixels[i], bgr.pixels[i + 2]);
  return bgr;
}

DetInput det_input(const Image& bgr, int max_side) {
  double ratio = std::max(bgr.width, bgr.height) > max_side
                     ? static_cast<double>(max_side) / std::max(bgr.width, bgr.height)
                     : 1.0;
  auto to32 = [](double v) { return std::max(32, static_cast<int>(std::lround(static_cast<int>(v) / 32.0)) * 32); };
  int h = to32(bgr.height * ratio), w = to32(bgr.width * ratio);
  int h_pad = det_side_bucket(h), w_pad = det_side_bucket(w);
  Tensor x = Tensor::empty(DType::kFloat32, {1, 3, h_pad, w_pad});
  std::fill_n(x.data<float>(), x.numel(), 0.f);  // the padding: the mean colour
  static const float mean[3] = {0.485f, 0.456f, 0.406f}, stdev[3] = {0.229f, 0.224f, 0.225f};
  normalize_into(resize_bilinear(bgr, w, h), x.data<float>(), w_pad, h_pad, mean, stdev);
  return {x, h, w};
}

std::vector<DetectedBox> OcrPipeline::detect(const Image& bgr) {
  auto [x, h, w] = det_input(bgr, options_.det_max_side);
  const int h_pad = static_cast<int>(x.dim(2)), w_pad = static_cast<int>(x.dim(3));
  Tensor prob = run_model(*det_, x)[0];
  if (prob.rank() != 4 || prob.dim(2) != h_pad || prob.dim(3) != w_pad)
    throw Error("the detector returned " + shape_str(prob.shape()));
  std::vector<float> valid(static_cast<size_t>(h) * w);  // the map of the image, without the padding
  for (int y = 0; y < h; ++y) std::copy_n(prob.data<float>() + static_cast<size_t>(y) * w_pad, w, valid.data() + static_cast<size_t>(y) * w);
  return db_boxes(valid.data(), h, w, bgr.width, bgr.height, options_.db);
}

std::vector<size_t> OcrPipeline::orient(std::vector<Image>& crops) {
  std::vector<size_t> turned;
  for (size_t start = 0; start < crops.size(); start += options_.rec_batch) {
    size_t end = std::min(crops.size(), start + options_.rec_batch);
    std::vector<const Image*> batch;
    for (size_t i = start; i < end; ++i) batch.push_back(&crops[i]);
    Tensor probs = run_model(*cls_, line_batch(batch, 192, batch_bucket(batch.size(), options_.rec_batch)))[0];
    if (probs.rank() != 2 || probs.dim(1) != 2) throw Error("the direction classifier returned " + shape_str(probs.shape()));
    for (size_t i = start; i < end; ++i) {
      const float* p = probs.data<float>() + (i - start) * 2;
      if (p[1] > p[0] && p[1] > options_.cls_threshold) rotate_180(crops[i]), turned.push_back(i);
    }
  }
  return turned;
}

std::vector<Decoded> OcrPipeline::recognize(const std::vector<Image>& crops, Session& model) {
  // Each line is padded to its own width bucket and shares batches only with lines of the same
  // bucket: little of it is padding, and what it reads does not depend on which other lines
  // (from this image or from others read with it) are in its batch.
  auto width_of = [&](size_t i) {
    double ratio = std::max(320.0 / 48.0, static_cast<double>(crops[i].width) / std::max(1, crops[i].height));
    return line_width_bucket(static_cast<int>(std::ceil(48 * ratio)));
  };
  std::map<int, std::vector<size_t>> by_width;
  for (size_t i = 0; i < crops.size(); ++i) by_width[width_of(i)].push_back(i);
  std::vector<Decoded> out(crops.size());
  for (const auto& [width, members] : by_width) {
    for (size_t start = 0; start < members.size(); start += options_.rec_batch) {
      size_t end = std::min(members.size(), start + options_.rec_batch);
      std::vector<const Image*> batch;
      for (size_t i = start; i < end; ++i) batch.push_back(&crops[members[i]]);
      Tensor probs = run_model(model, line_batch(batch, width, batch_bucket(batch.size(), options_.rec_batch)))[0];
      if (probs.rank() != 3) throw Error("the recognizer returned " + shape_str(probs.shape()));
      int steps = static_cast<int>(probs.dim(1)), classes = static_cast<int>(probs.dim(2));
      for (size_t i = start; i < end; ++i)
        out[members[i]] = ctc_greedy(probs.data<float>() + (i - start) * steps * classes, steps, classes, charset_);
    }
  }
  return out;
}

std::vector<Decoded> OcrPipeline::read(const std::vector<Image>& crops) {
  if (!rec_light_) return recognize(crops, *rec_);
  std::vector<Decoded> texts = recognize(crops, *rec_light_);
  std::vector<Image> unsure;
  std::vector<size_t> at;
  for (size_t i = 0; i < texts.size(); ++i)
    if (texts[i].score < options_.cascade_threshold) unsure.push_back(crops[i]), at.push_back(i);
  cascade_.lines += crops.size();
  cascade_.escalated += unsure.size();
  if (!unsure.empty()) {
    std::vector<Decoded> again = recognize(unsure, *rec_);
    for (size_t k = 0; k < at.size(); ++k) texts[at[k]] = std::move(again[k]);
  }
  return texts;
}

std::vector<OcrLine> OcrPipeline::run(const Image& rgb) { return run_many(std::span<const Image>(&rgb, 1)).at(0); }

std::vector<std::vector<OcrLine>> OcrPipeline::run_many(std::span<const Image> rgbs) {
  for (const Image& rgb : rgbs)
    if (rgb.width <= 0 || rgb.height <= 0) throw Error("the image is empty");
  std::vector<DetectedBox> boxes;
  std::vector<size_t> owner;  // image of each box
  std::vector<Image> crops;
  for (size_t i = 0; i < rgbs.size(); ++i) {
    Image bgr = to_bgr(rgbs[i]);
    for (DetectedBox& b : detect(bgr)) {
      crops.push_back(crop_quad(bgr, b.quad));
      boxes.push_back(std::move(b));
      owner.push_back(i);
    }
  }
  std::vector<size_t> turned;
  if (cls_ && !crops.empty()) turned = orient(crops);
  std::vector<Decoded> texts = crops.empty() ? std::vector<Decoded>{} : read(crops);
  // The direction classifier is small and JPEG artefacts fool it; a line it turned is also read
  // as it was, and the reading the recognizer is surer of wins.
  if (!turned.empty()) {
    std::vector<Image> upright;
    for (size_t i : turned) upright.push_back(crops[i]), rotate_180(upright.back());
    std::vector<Decoded> again = read(upright);
    for (size_t k = 0; k < turned.size(); ++k)
      if (again[k].score > texts[turned[k]].score) texts[turned[k]] = std::move(again[k]);
  }
  std::vector<std::vector<OcrLine>> lines(rgbs.size());
  for (size_t i = 0; i < boxes.size(); ++i)
    if (texts[i].score >= options_.drop_score && !texts[i].text.empty())
      lines[owner[i]].push_back({texts[i].text, texts[i].score, boxes[i].quad});
  return lines;
}

}  // namespace mminfer::ocr
