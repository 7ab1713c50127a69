// Fast paths against their scalar twins: AVX2 2-D pooling vs the N-d reference, and the
// 2-D resize fast path vs the general tap-product kernel, on odd sizes, pads and strides.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/cpu/nn/pooling_kernels.h"
#include "kernels/cpu/tensor/resize_kernels.h"

namespace mminfer::kernels {
namespace {

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

void expect_close(const std::vector<float>& a, const std::vector<float>& b, float tol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(b[i])) {
      ASSERT_EQ(a[i], b[i]) << what << " at " << i;
      continue;
    }
    ASSERT_NEAR(a[i], b[i], tol * (1 + std::abs(b[i]))) << what << " at " << i;
  }
}

TEST(PoolingResize, Pool2dAvx2MatchesReference) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> size(1, 23), k(1, 4), s(1, 3), pad(0, 2), d(1, 2), flag(0, 1);
  int checked = 0;
  for (int iter = 0; iter < 400; ++iter) {
    Attributes a;
    int kh = k(rng), kw = k(rng), pt = pad(rng), pl = pad(rng), pb = pad(rng), pr = pad(rng);
    if (pt >= kh || pb >= kh || pl >= kw || pr >= kw) pt = pb = pl = pr = 0;  // pads smaller than the window
    a.set("kernel_shape", std::vector<int64_t>{kh, kw});
    a.set("strides", std::vector<int64_t>{s(rng), s(rng)});
    a.set("dilations", std::vector<int64_t>{d(rng), d(rng)});
    a.set("pads", std::vector<int64_t>{pt, pl, pb, pr});
    a.set("ceil_mode", int64_t(flag(rng)));
    Shape x_shape = {1, 3, size(rng), size(rng)};
    PoolKind kind = flag(rng) ? PoolKind::kMax : PoolKind::kAverage;
    PoolParams p;
    try {
      p = make_pool_params(x_shape, a, kind, true, true);
    } catch (const Error&) {
      continue;  // window larger than the padded input
    }
    p.count_include_pad = flag(rng);
    std::vector<float> x = random_floats(static_cast<size_t>(shape_numel(x_shape)), rng);
    if (iter % 5 == 0) x[0] = -INFINITY;  // edge value
    size_t out_n = static_cast<size_t>(3 * p.out_plane());
    std::vector<float> fast(out_n), ref(out_n);
    ASSERT_TRUE(pool2d_f32_avx2(x.data(), fast.data(), 3, p));
    pool_reference_f32(x.data(), ref.data(), nullptr, 3, p);
    expect_close(fast, ref, 1e-5f, "iteration " + std::to_string(iter));
    ++checked;
  }
  EXPECT_GT(checked, 200);
}

TEST(PoolingResize, SameUpperPadsAndCeilMode) {
  Attributes a;
  a.set("kernel_shape", std::vector<int64_t>{3, 3});
  a.set("strides", std::vector<int64_t>{2, 2});
  a.set("auto_pad", std::string("SAME_UPPER"));
  PoolParams p = make_pool_params({1, 1, 5, 5}, a, PoolKind::kMax, true, true);
  EXPECT_EQ(p.out, (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(p.pad_begin, (std::vector<int64_t>{1, 1}));
  Attributes c;
  c.set("kernel_shape", std::vector<int64_t>{3, 3});
  c.set("strides", std::vector<int64_t>{2, 2});
  c.set("ceil_mode", int64_t(1));
  EXPECT_EQ(make_pool_params({1, 1, 4, 4}, c, PoolKind::kMax, true, true).out, (std::vector<int64_t>{2, 2}));
}

TEST(PoolingResize, GlobalAverageMatchesSum) {
  std::mt19937 rng(3);
  for (int64_t plane : {1, 7, 16, 49, 50}) {
    std::vector<float> x = random_floats(static_cast<size_t>(plane * 5), rng), y(5);
    global_average_f32_avx2(x.data(), y.data(), 5, plane);
    for (int64_t p = 0; p < 5; ++p) {
      double s = 0;
      for (int64_t i = 0; i < plane; ++i) s += x[p * plane + i];
      EXPECT_NEAR(y[p], s / plane, 1e-5);
    }
  }
}

TEST(PoolingResize, Resize2dFastMatchesGeneral) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> size(1, 19);
  const char* coords[] = {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "tf_half_pixel_for_nn"};
  const char* nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  int fast_runs = 0;
  for (int iter = 0; iter < 300; ++iter) {
    ResizeConfig cfg;
    cfg.mode = iter % 2 ? ResizeMode::kLinear : ResizeMode::kNearest;
    cfg.coordinate_mode = coords[iter % 5];
    if (cfg.mode == ResizeMode::kLinear && cfg.coordinate_mode == "tf_half_pixel_for_nn")
      cfg.coordinate_mode = "half_pixel";
    cfg.nearest_mode = nearest[(iter / 2) % 4];
    Shape in = {2, 3, size(rng), size(rng)};
    Shape out = {2, 3, iter % 7 == 0 ? in[2] * 2 : size(rng), iter % 7 == 0 ? in[3] * 2 : size(rng)};
    std::vector<double> scales = {1, 1, double(out[2]) / double(in[2]), double(out[3]) / double(in[3])};
    ResizePlan plan = plan_resize(in, out, scales, {}, cfg);
    std::vector<float> x = random_floats(static_cast<size_t>(shape_numel(in)), rng);
    std::vector<float> fast(static_cast<size_t>(shape_numel(out))), ref(fast.size());
    resize_general_f32(x.data(), ref.data(), plan);
    if (!resize2d_f32_fast(x.data(), fast.data(), plan)) continue;
    ++fast_runs;
    expect_close(fast, ref, 1e-5f, "iteration " + std::to_string(iter) + " " + cfg.coordinate_mode);
  }
  EXPECT_GT(fast_runs, 250);
}

TEST(PoolingResize, NearestTwiceUpsampleCopiesPixels) {
  ResizeConfig cfg;
  cfg.coordinate_mode = "asymmetric";
  cfg.nearest_mode = "floor";
  Shape in = {1, 1, 3, 21}, out = {1, 1, 6, 42};
  ResizePlan plan = plan_resize(in, out, {1, 1, 2, 2}, {}, cfg);
  std::vector<float> x(63), y(252);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  ASSERT_TRUE(resize2d_f32_fast(x.data(), y.data(), plan));
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t c = 0; c < 42; ++c) ASSERT_EQ(y[r * 42 + c], x[(r / 2) * 21 + c / 2]);
}

TEST(PoolingResize, FastPathDeclinesCropAndCubic) {
  ResizeConfig cfg;
  cfg.mode = ResizeMode::kCubic;
  ResizePlan plan = plan_resize({1, 1, 4, 4}, {1, 1, 8, 8}, {1, 1, 2, 2}, {}, cfg);
  std::vector<float> x(16), y(64);
  EXPECT_FALSE(resize2d_f32_fast(x.data(), y.data(), plan));
  cfg.mode = ResizeMode::kLinear;
  cfg.coordinate_mode = "tf_crop_and_resize";
  plan = plan_resize({1, 1, 4, 4}, {1, 1, 8, 8}, {1, 1, 2, 2}, {0, 0, -0.5, -0.5, 1, 1, 1.5, 1.5}, cfg);
  EXPECT_FALSE(resize2d_f32_fast(x.data(), y.data(), plan));
}

}  // namespace
}  // namespace mminfer::kernels
