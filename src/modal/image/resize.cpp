#include "modal/image/resize.h"

#include <algorithm>
#include <cmath>
#include <numbers>
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

double sinc(double x) {
  if (x == 0.0) return 1.0;
  x *= std::numbers::pi;
  return std::sin(x) / x;
}

double lanczos(double x) {  // three lobes, as Pillow's LANCZOS
  return x >= -3.0 && x < 3.0 ? sinc(x) * sinc(x / 3.0) : 0.0;
}

// For each output index along one axis: the first input index, how many inputs, their weights.
struct AxisWeights {
  int taps = 0;  // row length of `weights`
  std::vector<int> first, count;
  std::vector<int32_t> weights;
};

AxisWeights axis_weights(int in_size, int out_size, ResizeFilter filter) {
  const double radius = filter == ResizeFilter::kBilinear ? 1.0 : filter == ResizeFilter::kBicubic ? 2.0 : 3.0;
  double (*kernel)(double) =
      filter == ResizeFilter::kBilinear ? triangle : filter == ResizeFilter::kBicubic ? cubic : lanczos;
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

// Horizontal pass: output columns [x0, x0 + w) of a resize to out_w, for input rows [y0, y0 + h).
Image resize_rows(const Image& in, int out_w, int x0, int w, int y0, int h, ResizeFilter filter) {
  AxisWeights k = axis_weights(in.width, out_w, filter);
  Image out = Image::blank(w, h);
  parallel_for(h, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* src = in.row(y0 + static_cast<int>(r));
      uint8_t* dst = out.row(static_cast<int>(r));
      for (int x = 0; x < w; ++x) {
        const int32_t* wt = &k.weights[static_cast<size_t>(x0 + x) * k.taps];
        const uint8_t* s = src + 3 * k.first[x0 + x];
        int32_t red = 1 << (kPrecisionBits - 1), green = red, blue = red;  // +0.5 so the shift rounds
        for (int j = 0; j < k.count[x0 + x]; ++j)
          red += s[3 * j] * wt[j], green += s[3 * j + 1] * wt[j], blue += s[3 * j + 2] * wt[j];
        dst[3 * x] = to_u8(red), dst[3 * x + 1] = to_u8(green), dst[3 * x + 2] = to_u8(blue);
      }
    }
  });
  return out;
}

// Vertical pass with weights `k`: output rows [y0, y0 + h), where `in` holds input rows
// [in_y0, in_y0 + in.height) only.
Image resize_columns(const Image& in, const AxisWeights& k, int in_y0, int y0, int h) {
  Image out = Image::blank(in.width, h);
  const size_t n = static_cast<size_t>(in.width) * 3;
  parallel_for(h, 16, [&](int64_t r0, int64_t r1) {
    std::vector<int32_t> acc(n);
    for (int64_t r = r0; r < r1; ++r) {
      const int y = y0 + static_cast<int>(r);
      std::fill(acc.begin(), acc.end(), 1 << (kPrecisionBits - 1));
      const int32_t* wt = &k.weights[static_cast<size_t>(y) * k.taps];
      for (int j = 0; j < k.count[y]; ++j) {
        const uint8_t* s = in.row(k.first[y] + j - in_y0);
        for (size_t i = 0; i < n; ++i) acc[i] += s[i] * wt[j];
      }
      uint8_t* dst = out.row(static_cast<int>(r));
      for (size_t i = 0; i < n; ++i) dst[i] = to_u8(acc[i]);
    }
  });
  return out;
}

// Columns [x0, x0 + w) of rows [y0, y0 + h), copied.
Image copy_window(const Image& in, int x0, int w, int y0, int h) {
  Image out = Image::blank(w, h);
  for (int r = 0; r < h; ++r) std::copy_n(in.row(y0 + r) + 3 * x0, 3 * w, out.row(r));
  return out;
}

}  // namespace

Image resize(const Image& image, int width, int height, ResizeFilter filter) {
  return resize_window(image, width, height, Window{0, 0, width, height}, filter);
}

Image resize_window(const Image& image, int width, int height, const Window& window, ResizeFilter filter) {
  if (width <= 0 || height <= 0 || image.width <= 0 || image.height <= 0)
    throw Error("resize: cannot resize " + std::to_string(image.width) + "x" + std::to_string(image.height) + " to " +
                std::to_string(width) + "x" + std::to_string(height));
  const Window& w = window;
  if (w.width <= 0 || w.height <= 0 || w.x < 0 || w.y < 0 || w.x > width - w.width || w.y > height - w.height)
    throw Error("resize: the window " + std::to_string(w.width) + "x" + std::to_string(w.height) + " at (" +
                std::to_string(w.x) + ", " + std::to_string(w.y) + ") is not inside " + std::to_string(width) + "x" +
                std::to_string(height));
  // Input rows the vertical pass reads for the window's rows: only those go through the
  // horizontal pass.
  int in_y0 = w.y, in_y1 = w.y + w.height;
  AxisWeights k;
  if (height != image.height) {
    k = axis_weights(image.height, height, filter);
    in_y0 = image.height, in_y1 = 0;
    for (int y = w.y; y < w.y + w.height; ++y) {
      if (k.count[y] == 0) continue;
      in_y0 = std::min(in_y0, k.first[y]);
      in_y1 = std::max(in_y1, k.first[y] + k.count[y]);
    }
    if (in_y1 <= in_y0) in_y0 = 0, in_y1 = 1;  // no taps at all (cannot happen for real sizes)
  }
  Image rows = width == image.width ? copy_window(image, w.x, w.width, in_y0, in_y1 - in_y0)
                                    : resize_rows(image, width, w.x, w.width, in_y0, in_y1 - in_y0, filter);
  if (height == image.height) return rows;
  return resize_columns(rows, k, in_y0, w.y, w.height);
}

}  // namespace mminfer::image
