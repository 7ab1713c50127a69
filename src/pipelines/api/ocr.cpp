// mminfer::Ocr, the public face of ocr::OcrPipeline: encoded images in, text lines out.
#include <mutex>

#include "mminfer/pipelines.h"
#include "modal/image/image.h"
#include "pipelines/api/guarded.h"
#include "pipelines/ocr/ocr_pipeline.h"

namespace mminfer {

namespace {

TextLine public_line(const ocr::OcrLine& line) {
  TextLine out;
  out.text = line.text;
  out.score = line.score;
  for (size_t c = 0; c < 4; ++c)
    out.box[c] = {static_cast<float>(line.box[c].x), static_cast<float>(line.box[c].y)};
  return out;
}

image::Image decode(const Bytes& bytes, size_t index) {
  try {
    return image::decode_image(bytes);
  } catch (const Error& e) {
    throw pipelines::numbered(e, "image", index);
  }
}

class OcrImpl final : public Ocr {
 public:
  OcrImpl(const std::string& dir, const SessionOptions& options) : threads_(options.threads) {
    pipelines::Manifest manifest = ocr::ocr_manifest(dir);
    pipeline_ = std::make_unique<ocr::OcrPipeline>(manifest, options, ocr::ocr_options(manifest));
  }

  Status read(const Bytes& image, std::vector<TextLine>* lines) override {
    return pipelines::guarded(mutex_, threads_, [&] {
      std::vector<ocr::OcrLine> found = pipeline_->run(image::decode_image(image));
      lines->clear();
      for (const ocr::OcrLine& line : found) lines->push_back(public_line(line));
    });
  }

  Status read(const std::vector<Bytes>& images, std::vector<std::vector<TextLine>>* lines) override {
    return pipelines::guarded(mutex_, threads_, [&] {
      std::vector<image::Image> decoded;
      for (size_t i = 0; i < images.size(); ++i) decoded.push_back(decode(images[i], i));
      std::vector<std::vector<ocr::OcrLine>> found = pipeline_->run_many(decoded);
      lines->assign(found.size(), {});
      for (size_t i = 0; i < found.size(); ++i)
        for (const ocr::OcrLine& line : found[i]) (*lines)[i].push_back(public_line(line));
    });
  }

 private:
  int threads_;
  std::unique_ptr<ocr::OcrPipeline> pipeline_;
  std::mutex mutex_;
};

}  // namespace

Status Ocr::open(const std::string& dir, const SessionOptions& options, std::unique_ptr<Ocr>* out) {
  return pipelines::status_of(options.threads, [&] { *out = std::make_unique<OcrImpl>(dir, options); });
}

}  // namespace mminfer
