#include "modal/image/resize.h"

#include <cmath>
#include <string>

#include "core/parallel.h"
#include "mminfer/status.h"

namespace mminfer::image {

namespace {

// Weights are fixed point with 22 fractional bits: a sum of 8-bit samples times weights whose
// magnitudes add up to a little over 1 stays inside int32.
constexpr int kPrecisionBits = 32 - 8 - 2;

double triangle(double x) {
  x = std::abs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

double cubic(double x) {  // Keys cubic with a = -0.5
  constexpr double a = -0.5;
  x = std::abs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

// For each output index along one axis: the first input index, how many inputs, their weights.
struct AxisWeights {
  int taps = 0;  // row length of `weights`
  std::vector<int> first, count;
  std::vector<int32_t> weights;
};

AxisWeights axis_weights(int in_size, int out_size, ResizeFilter filter) {
  const double radius = filter == ResizeFilter::kBilinear ? 1.0 : 2.0;
  double (*kernel)(double) = filter == ResizeFilter::kBilinear ? triangle : cubic;
  const double scale = static_cast<double>(in_size) / out_size;
  const double stretch = std::max(scale, 1.0);  // widen the filter when shrinking
  const double support = radius * stretch;
  AxisWeights w;
  w.taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  w.first.resize(out_size);
  w.count.resize(out_size);
  w.weights.assign(static_cast<size_t>(out_size) * w.taps, 0);
  std::vector<double> k(w.taps);
  for (int i = 0; i < out_size; ++i) {
    const double center = (i + 0.5) * scale;  // output pixel centre in input coordinates
    int lo = static_cast<int>(center - support + 0.5);
    int hi = static_cast<int>(center + support + 0.5);
    lo = std::max(lo, 0);
    hi = std::min(hi, in_size);
    const double inv_stretch = 1.0 / stretch;
    double sum = 0.0;
    for (int j = lo; j < hi; ++j) sum += k[j - lo] = kernel((j - center + 0.5) * inv_stretch);
    w.first[i] = lo;
    w.count[i] = hi - lo;
    for (int j = 0; j < hi - lo; ++j) {
      double v = (sum != 0.0 ? k[j] / sum : k[j]) * (1 << kPrecisionBits);
      w.weights[static_cast<size_t>(i) * w.taps + j] = static_cast<int32_t>(v < 0 ? v - 0.5 : v + 0.5);
    }
  }
  return w;
}

uint8_t to_u8(int32_t acc) {
  int32_t v = acc >> kPrecisionBits;  // arithmetic shift: floor, so negatives clamp to 0
  return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

Image resize_rows(const Image& in, int out_w, ResizeFilter filter) {
  AxisWeights w = axis_weights(in.width, out_w, filter);
  Image out = Image::blank(out_w, in.height);
  parallel_for(in.height, 16, [&](int64_t y0, int64_t y1) {
    for (int64_t y = y0; y < y1; ++y) {
      const uint8_t* src = in.row(static_cast<int>(y));
      uint8_t* dst = out.row(static_cast<int>(y));
      for (int x = 0; x < out_w; ++x) {
        const int32_t* k = &w.weights[static_cast<size_t>(x) * w.taps];
        const uint8_t* s = src + 3 * w.first[x];
        int32_t r = 1 << (kPrecisionBits - 1), g = r, b = r;  // +0.5 so the shift rounds
        for (int j = 0; j < w.count[x]; ++j) r += s[3 * j] * k[j], g += s[3 * j + 1] * k[j], b += s[3 * j + 2] * k[j];
        dst[3 * x] = to_u8(r), dst[3 * x + 1] = to_u8(g), dst[3 * x + 2] = to_u8(b);
      }
    }
  });
  return out;
}

Image resize_columns(const Image& in, int out_h, ResizeFilter filter) {
  AxisWeights w = axis_weights(in.height, out_h, filter);
  Image out = Image::blank(in.width, out_h);
  const size_t n = static_cast<size_t>(in.width) * 3;
  parallel_for(out_h, 16, [&](int64_t y0, int64_t y1) {
    std::vector<int32_t> acc(n);
    for (int64_t y = y0; y < y1; ++y) {
      std::fill(acc.begin(), acc.end(), 1 << (kPrecisionBits - 1));
      const int32_t* k = &w.weights[static_cast<size_t>(y) * w.taps];
      for (int j = 0; j < w.count[y]; ++j) {
        const uint8_t* s = in.row(w.first[y] + j);
        for (size_t i = 0; i < n; ++i) acc[i] += s[i] * k[j];
      }
      uint8_t* dst = out.row(static_cast<int>(y));
      for (size_t i = 0; i < n; ++i) dst[i] = to_u8(acc[i]);
    }
  });
  return out;
}

}  // namespace

Image resize(const Image& image, int width, int height, ResizeFilter filter) {
  if (width <= 0 || height <= 0 || image.width <= 0 || image.height <= 0)
    throw Error("resize: cannot resize " + std::to_string(image.width) + "x" + std::to_string(image.height) + " to " +
                std::to_string(width) + "x" + std::to_string(height));
  if (width == image.width && height == image.height) return image;
  if (width == image.width) return resize_columns(image, height, filter);
  Image rows = resize_rows(image, width, filter);
  return height == image.height ? rows : resize_columns(rows, height, filter);
}

}  // namespace mminfer::image
