// RoiAlign and MaxRoiPool on hostile regions: a region far larger than the map visits only the
// samples that can land on it and pools exactly what visiting all of them gives; a region with a
// NaN or infinite corner gives NaN; huge corners end without overflow.
#include <chrono>
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "kernel_run.h"

namespace mminfer {
namespace {

using testing::floats;

Tensor roi_align(const Tensor& x, std::vector<float> box, const std::string& mode, int64_t out = 2) {
  Attributes a;
  a.set("output_height", out);
  a.set("output_width", out);
  a.set("mode", mode);
  Tensor rois = floats({1, 4}, box);
  Tensor bi = Tensor::empty(DType::kInt64, {1});
  bi.data<int64_t>()[0] = 0;
  return testing::run_kernel("RoiAlign", "", 16, a, {&x, &rois, &bi}, 1)[0];
}

// ONNX RoiAlign (half_pixel, adaptive grid), every sample visited: bilinear inside [-1, size],
// 0 outside; in max mode the largest weighted corner stands for a sample.
std::vector<double> reference(const std::vector<float>& plane, int64_t h, int64_t w, std::vector<float> box, bool max,
                              int64_t out) {
  const double x0 = box[0] - 0.5, y0 = box[1] - 0.5;
  const double bw = (double(box[2]) - box[0]) / double(out), bh = (double(box[3]) - box[1]) / double(out);
  const int64_t gh = static_cast<int64_t>(std::ceil(bh)), gw = static_cast<int64_t>(std::ceil(bw));
  auto at = [&](int64_t y, int64_t x) { return double(plane[y * w + x]); };
  auto sample = [&](double y, double x) {
    if (y < -1 || y > h || x < -1 || x > w) return 0.0;
    y = std::max(y, 0.0), x = std::max(x, 0.0);
    int64_t yl = int64_t(y), xl = int64_t(x), yh = std::min(yl + 1, h - 1), xh = std::min(xl + 1, w - 1);
    if (yl >= h - 1) yl = yh = h - 1, y = double(yl);
    if (xl >= w - 1) xl = xh = w - 1, x = double(xl);
    double ly = y - yl, lx = x - xl;
    double c[4] = {(1 - ly) * (1 - lx) * at(yl, xl), (1 - ly) * lx * at(yl, xh), ly * (1 - lx) * at(yh, xl), ly * lx * at(yh, xh)};
    return max ? std::max(std::max(c[0], c[1]), std::max(c[2], c[3])) : c[0] + c[1] + c[2] + c[3];
  };
  std::vector<double> y;
  for (int64_t ph = 0; ph < out; ++ph)
    for (int64_t pw = 0; pw < out; ++pw) {
      double acc = max ? -INFINITY : 0;
      for (int64_t iy = 0; iy < gh; ++iy)
        for (int64_t ix = 0; ix < gw; ++ix) {
          double v = sample(y0 + ph * bh + (iy + 0.5) * bh / gh, x0 + pw * bw + (ix + 0.5) * bw / gw);
          acc = max ? std::max(acc, v) : acc + v;
        }
      y.push_back(max ? acc : acc / double(gh * gw));
    }
  return y;
}

TEST(RoiAlign, RegionsFarLargerThanTheMapPoolAsIfEverySampleWereVisited) {
  const int64_t h = 5, w = 4;
  std::vector<float> plane = testing::normal(h * w, 3, 1.f, 0.5f);
  Tensor x = floats({1, 1, h, w}, plane);
  for (std::vector<float> box : {std::vector<float>{0.5f, 1.f, 3.f, 4.5f}, {-3000.f, -2000.f, 1000.f, 2500.f},
                                 {2.f, -5000.f, 3000.f, 3.f}, {10.f, 10.f, 2000.f, 2000.f}})
    for (bool max : {false, true}) {
      Tensor y = roi_align(x, box, max ? "max" : "avg");
      std::vector<double> want = reference(plane, h, w, box, max, 2);
      for (int64_t i = 0; i < 4; ++i)
        EXPECT_NEAR(y.data<float>()[i], want[i], 1e-6 * (1 + std::abs(want[i]))) << box[0] << " " << max << " " << i;
    }
}

TEST(RoiAlign, AHugeRegionEndsAtOnce) {
  Tensor x = floats({1, 1, 4, 4}, testing::normal(16, 4, 1.f, 2.f));
  const auto t0 = std::chrono::steady_clock::now();
  for (bool max : {false, true}) {
    Tensor y = roi_align(x, {-1e12f, -1e12f, 1e12f, 1e12f}, max ? "max" : "avg");
    for (int64_t i = 0; i < 4; ++i) EXPECT_TRUE(std::isfinite(y.data<float>()[i]));
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
}

TEST(RoiAlign, ANonFiniteCornerGivesNaN) {
  Tensor x = floats({1, 1, 4, 4}, testing::normal(16, 5));
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (std::vector<float> box : {std::vector<float>{nan, 0, 2, 2}, {0, 0, inf, 2}, {-inf, 0, 2, 2}})
    for (const char* mode : {"avg", "max"}) {
      Tensor y = roi_align(x, box, mode);
      for (int64_t i = 0; i < 4; ++i) EXPECT_TRUE(std::isnan(y.data<float>()[i])) << mode << " " << i;
    }
}

TEST(MaxRoiPool, NonFiniteCornersGiveNaNAndHugeOnesEnd) {
  Tensor x = floats({1, 2, 4, 4}, testing::normal(32, 6));
  Attributes a;
  a.set("pooled_shape", std::vector<int64_t>{2, 2});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor rois = floats({3, 5}, {0, nan, 0, 2, 2, 0, -1e30f, -1e30f, 1e30f, 1e30f, 0, 0, 0, 3, 3});
  Tensor y = testing::run_kernel("MaxRoiPool", "", 1, a, {&x, &rois}, 1)[0];
  ASSERT_EQ(y.shape(), (Shape{3, 2, 2, 2}));
  for (int64_t i = 0; i < 8; ++i) EXPECT_TRUE(std::isnan(y.data<float>()[i])) << i;
  for (int64_t i = 8; i < 24; ++i) EXPECT_TRUE(std::isfinite(y.data<float>()[i])) << i;
  // The whole 4 x 4 map in 2 x 2 bins: each bin's maximum.
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        float m = -INFINITY;
        for (int64_t yy = 2 * i; yy < 2 * i + 2; ++yy)
          for (int64_t xx = 2 * j; xx < 2 * j + 2; ++xx) m = std::max(m, x.data<float>()[c * 16 + yy * 4 + xx]);
        EXPECT_EQ(y.data<float>()[16 + c * 4 + i * 2 + j], m);
      }
  Tensor bad = floats({1, 5}, {nan, 0, 0, 1, 1});
  EXPECT_THROW(testing::run_kernel("MaxRoiPool", "", 1, a, {&x, &bad}, 1), Error);
}

}  // namespace
}  // namespace mminfer
