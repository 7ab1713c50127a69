// OcrPipeline::run_many reads the lines each image gives alone, though the crops of all images
// share the classifier's and recognizer's batches (images from tools/make_ocr_eval.py's set).
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "modal/image/image.h"
#include "pipelines/ocr/ocr_pipeline.h"

namespace {

using mminfer::SessionOptions;
using mminfer::image::Image;

Image load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return mminfer::image::decode_image(bytes);
}

TEST(OcrRunMany, ReadsTheLinesOfEachImageAlone) {
  SessionOptions session;
  session.threads = 2;
  mminfer::ocr::OcrPipeline ocr(MMINFER_PPOCR_DIR, session);
  std::vector<Image> images;
  for (const char* name : {"clean-en/000.png", "clean-zh/001.png", "digits/002.png", "rotated/003.png", "clean-en/004.png"})
    images.push_back(load(std::string(MMINFER_OCR_EVAL_DIR) + "/" + name));
  std::vector<std::vector<mminfer::ocr::OcrLine>> together = ocr.run_many(images);
  ASSERT_EQ(together.size(), images.size());
  size_t lines = 0;
  for (size_t i = 0; i < images.size(); ++i) {
    std::vector<mminfer::ocr::OcrLine> alone = ocr.run(images[i]);
    ASSERT_EQ(together[i].size(), alone.size()) << "image " << i;
    for (size_t k = 0; k < alone.size(); ++k) {
      EXPECT_EQ(together[i][k].text, alone[k].text) << "image " << i << " line " << k;
      EXPECT_NEAR(together[i][k].score, alone[k].score, 0.02) << "image " << i << " line " << k;
    }
    lines += alone.size();
  }
  EXPECT_GE(lines, images.size());  // every image has text
  EXPECT_TRUE(ocr.run_many({}).empty());
}

}  // namespace
