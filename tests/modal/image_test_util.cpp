#include "image_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>

#include "core/npy.h"
#include "mminfer/status.h"

namespace mminfer::image::test {

std::string case_path(const std::string& name) { return std::string(MMINFER_IMAGE_CASES) + "/" + name; }

std::vector<std::vector<std::string>> manifest(const std::string& kind) {
  std::ifstream in(case_path("manifest.txt"));
  if (!in) throw Error("no manifest at " + case_path("manifest.txt") + "; run ctest (image_cases_generate makes it)");
  std::vector<std::vector<std::string>> out;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string first, w;
    words >> first;
    if (first != kind) continue;
    std::vector<std::string> fields;
    while (words >> w) fields.push_back(w);
    out.push_back(fields);
  }
  return out;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

Image read_npy_image(const std::string& path) {
  Tensor t = read_npy(path);
  if (t.dtype() != DType::kUint8 || t.rank() != 3 || t.dim(2) != 3) throw Error(path + ": not a uint8 HxWx3 array");
  Image im = Image::blank(static_cast<int>(t.dim(1)), static_cast<int>(t.dim(0)));
  std::memcpy(im.pixels.data(), t.raw(), im.pixels.size());
  return im;
}

int max_abs_diff(const Image& a, const Image& b) {
  if (a.width != b.width || a.height != b.height || a.pixels.size() != b.pixels.size()) return -1;
  int worst = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) worst = std::max(worst, std::abs(a.pixels[i] - b.pixels[i]));
  return worst;
}

float max_abs_diff(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != DType::kFloat32 || b.dtype() != DType::kFloat32)
    return std::numeric_limits<float>::infinity();
  float worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i) worst = std::max(worst, std::abs(a.data<float>()[i] - b.data<float>()[i]));
  return worst;
}

void report(const std::string& what, int cases, double max_diff) {
  std::cout << "[ vs Pillow ] " << what << ": " << cases << " cases, max |ours - Pillow| = " << max_diff << "\n";
  ::testing::Test::RecordProperty(what + " max_diff", std::to_string(max_diff));
}

}  // namespace mminfer::image::test
