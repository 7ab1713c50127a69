// RoiAlign and MaxRoiPool: pool each region of interest of an N,C,H,W map to a fixed grid.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/parallel.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/common/resample_float_io.h"

namespace mminfer::kernels {

namespace {

void check_feature_map(const Tensor& x) {
  if (x.rank() != 4) fail("input X must be 4-D (N, C, H, W), got " + shape_str(x.shape()));
}

class RoiAlign final : public Kernel {
 public:
  explicit RoiAlign(const KernelSpec& spec) {
    const Attributes& a = spec.a();
    std::string mode = a.get_string("mode", "avg");
    if (mode != "avg" && mode != "max") fail("attribute mode must be 'avg' or 'max', got '" + mode + "'");
    max_mode_ = mode == "max";
    out_h_ = a.get_int("output_height", 1);
    out_w_ = a.get_int("output_width", 1);
    sampling_ratio_ = a.get_int("sampling_ratio", 0);
    spatial_scale_ = a.get_float("spatial_scale", 1.0f);
    std::string ctm =
        a.get_string("coordinate_transformation_mode", spec.opset >= 16 ? "half_pixel" : "output_half_pixel");
    if (ctm != "half_pixel" && ctm != "output_half_pixel")
      fail("attribute coordinate_transformation_mode must be 'half_pixel' or 'output_half_pixel'");
    half_pixel_ = ctm == "half_pixel";
    if (out_h_ < 1 || out_w_ < 1) fail("attributes output_height and output_width must be positive");
    if (sampling_ratio_ < 0) fail("attribute sampling_ratio must not be negative");
  }

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "X");
    const Tensor& rois = need_input(in, 1, "rois");
    const Tensor& bi = need_input(in, 2, "batch_indices");
    check_feature_map(x);
    if (rois.rank() != 2 || rois.dim(1) != 4) fail("input rois must be (num_rois, 4), got " + shape_str(rois.shape()));
    if (bi.rank() != 1 || bi.dim(0) != rois.dim(0))
      fail("input batch_indices must be (num_rois), got " + shape_str(bi.shape()));
    out[0] = {x.dtype(), {rois.dim(0), x.dim(1), out_h_, out_w_}};
  }

  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    std::vector<float> rois = load_floats(*in[1]);
    std::vector<int64_t> batch = read_int_tensor(*in[2], "batch_indices");
    for (int64_t b : batch)
      if (b < 0 || b >= x.dim(0))
        fail("input batch_indices has " + std::to_string(b) + ", outside batch " + std::to_string(x.dim(0)));
    with_float_data(x, *out[0], [&](auto* xs, auto* ys) { compute(xs, ys, x.shape(), rois, batch); });
  }

 private:
  template <typename T>
  void compute(const T* x, T* y, const Shape& xs, const std::vector<float>& rois,
               const std::vector<int64_t>& batch) const {
    const int64_t C = xs[1], H = xs[2], W = xs[3], R = static_cast<int64_t>(batch.size());
    parallel_for(R * C, 1, [&](int64_t begin, int64_t end) {
      for (int64_t rc = begin; rc < end; ++rc) {
        int64_t r = rc / C, c = rc % C;
        const T* plane = x + (batch[r] * C + c) * H * W;
        T* dst = y + rc * out_h_ * out_w_;
        double offset = half_pixel_ ? 0.5 : 0.0;
        double x0 = rois[r * 4] * spatial_scale_ - offset, y0 = rois[r * 4 + 1] * spatial_scale_ - offset;
        double x1 = rois[r * 4 + 2] * spatial_scale_ - offset, y1 = rois[r * 4 + 3] * spatial_scale_ - offset;
        if (!std::isfinite(x0) || !std::isfinite(y0) || !std::isfinite(x1) || !std::isfinite(y1)) {
          // No sample of a region without finite corners is defined: NaN shows it.
          std::fill(dst, dst + out_h_ * out_w_, std::numeric_limits<T>::quiet_NaN());
          continue;
        }
        double rw = x1 - x0, rh = y1 - y0;
        if (!half_pixel_) {
          rw = std::max(rw, 1.0);
          rh = std::max(rh, 1.0);
        }
        double bin_h = rh / static_cast<double>(out_h_), bin_w = rw / static_cast<double>(out_w_);
        // Samples per bin: as many as the bin is wide, for the adaptive grid. A region far larger
        // than the map has billions; only those that can land on the map are visited (below), the
        // others read 0 as sample() would.
        double gh = sampling_ratio_ > 0 ? static_cast<double>(sampling_ratio_) : std::ceil(bin_h);
        double gw = sampling_ratio_ > 0 ? static_cast<double>(sampling_ratio_) : std::ceil(bin_w);
        double count = std::max(gh * gw, 1.0);
        for (int64_t ph = 0; ph < out_h_; ++ph) {
          const SampleRange ys = on_map(y0 + ph * bin_h, bin_h, gh, H);
          for (int64_t pw = 0; pw < out_w_; ++pw) {
            const SampleRange xr = on_map(x0 + pw * bin_w, bin_w, gw, W);
            double acc = max_mode_ ? -std::numeric_limits<double>::infinity() : 0.0;
            bool any = false;
            for (int64_t iy = ys.first; iy < ys.last; ++iy) {
              double yy = y0 + ph * bin_h + (static_cast<double>(iy) + 0.5) * bin_h / gh;
              for (int64_t ix = xr.first; ix < xr.last; ++ix) {
                double xx = x0 + pw * bin_w + (static_cast<double>(ix) + 0.5) * bin_w / gw;
                double v = sample(plane, H, W, yy, xx);
                any = true;
                acc = max_mode_ ? std::max(acc, v) : acc + v;
              }
            }
            // Samples skipped off the map read 0: a sum is unchanged, a maximum meets 0.
            if (max_mode_ && (ys.skipped || xr.skipped) && gh >= 1 && gw >= 1) acc = std::max(acc, 0.0), any = true;
            dst[ph * out_w_ + pw] = static_cast<T>(max_mode_ ? (any ? acc : 0.0) : acc / count);
          }
        }
      }
    });
  }

  // The samples of a bin along one axis that may land on the map: [first, last) of the n
  // samples at start + (i + 0.5) * size / n, widened by two against rounding (sample() checks
  // each one); `skipped`: some of the n lie outside it.
  struct SampleRange {
    int64_t first = 0, last = 0;
    bool skipped = false;
  };
  static SampleRange on_map(double start, double size, double n, int64_t extent) {
    if (!(n >= 1)) return {};
    const double step = size / n;
    double lo = 0, hi = n;
    if (step > 0) {
      lo = std::max(0.0, std::floor((-1.0 - start) / step - 0.5) - 2);
      hi = std::min(n, std::ceil((static_cast<double>(extent) - start) / step - 0.5) + 3);
    }
    if (hi <= lo) return {0, 0, true};
    SampleRange r{static_cast<int64_t>(lo), static_cast<int64_t>(hi), false};
    r.skipped = r.first > 0 || static_cast<double>(r.last) < n;
    return r;
  }

  // Bilinear sample; in max mode the largest weighted corner stands for the sample, which
  // is what the reference implementations do.
  template <typename T>
  double sample(const T* plane, int64_t H, int64_t W, double y, double x) const {
    if (y < -1.0 || y > static_cast<double>(H) || x < -1.0 || x > static_cast<double>(W)) return 0.0;
    y = std::max(y, 0.0);
    x = std::max(x, 0.0);
    int64_t yl = static_cast<int64_t>(y), xl = static_cast<int64_t>(x), yh, xh;
    if (yl >= H - 1) {
      yh = yl = H - 1;
      y = static_cast<double>(yl);
    } else {
      yh = yl + 1;
    }
    if (xl >= W - 1) {
      xh = xl = W - 1;
      x = static_cast<double>(xl);
    } else {
      xh = xl + 1;
    }
    double ly = y - yl, lx = x - xl, hy = 1 - ly, hx = 1 - lx;
    double w1 = hy * hx, w2 = hy * lx, w3 = ly * hx, w4 = ly * lx;
    double v1 = plane[yl * W + xl], v2 = plane[yl * W + xh], v3 = plane[yh * W + xl], v4 = plane[yh * W + xh];
    if (max_mode_) return std::max(std::max(w1 * v1, w2 * v2), std::max(w3 * v3, w4 * v4));
    return w1 * v1 + w2 * v2 + w3 * v3 + w4 * v4;
  }

  bool max_mode_ = false, half_pixel_ = true;
  int64_t out_h_ = 1, out_w_ = 1, sampling_ratio_ = 0;
  float spatial_scale_ = 1.0f;
};

// Caffe-style max pooling over rounded ROI bins.
class MaxRoiPool final : public Kernel {
 public:
  explicit MaxRoiPool(const KernelSpec& spec) {
    std::vector<int64_t> ps = spec.a().get_ints("pooled_shape");
    if (ps.size() != 2 || ps[0] < 1 || ps[1] < 1) fail("attribute pooled_shape must be two positive values");
    ph_ = ps[0];
    pw_ = ps[1];
    scale_ = spec.a().get_float("spatial_scale", 1.0f);
  }
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "X");
    const Tensor& rois = need_input(in, 1, "rois");
    check_feature_map(x);
    if (rois.rank() != 2 || rois.dim(1) != 5) fail("input rois must be (num_rois, 5), got " + shape_str(rois.shape()));
    out[0] = {x.dtype(), {rois.dim(0), x.dim(1), ph_, pw_}};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    std::vector<float> rois = load_floats(*in[1]);
    with_float_data(x, *out[0], [&](auto* xs, auto* ys) { compute(xs, ys, x.shape(), rois); });
  }

 private:
  template <typename T>
  void compute(const T* x, T* y, const Shape& xs, const std::vector<float>& rois) const {
    const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], R = static_cast<int64_t>(rois.size() / 5);
    for (int64_t r = 0; r < R; ++r) {
      const float* roi = &rois[r * 5];
      if (!(roi[0] >= 0 && roi[0] < static_cast<float>(N)))
        fail("rois batch index " + std::to_string(roi[0]) + " is outside batch " + std::to_string(N));
      const int64_t b = static_cast<int64_t>(roi[0]);
      const float corners[4] = {roi[1] * scale_, roi[2] * scale_, roi[3] * scale_, roi[4] * scale_};
      if (!std::all_of(corners, corners + 4, [](float v) { return std::isfinite(v); })) {
        // No bin of a region without finite corners is defined: NaN shows it.
        std::fill(y + r * C * ph_ * pw_, y + (r + 1) * C * ph_ * pw_, std::numeric_limits<T>::quiet_NaN());
        continue;
      }
      int64_t sw = map_coordinate(corners[0]), sh = map_coordinate(corners[1]);
      int64_t ew = map_coordinate(corners[2]), eh = map_coordinate(corners[3]);
      double bh = static_cast<double>(std::max<int64_t>(eh - sh + 1, 1)) / static_cast<double>(ph_);
      double bw = static_cast<double>(std::max<int64_t>(ew - sw + 1, 1)) / static_cast<double>(pw_);
      for (int64_t c = 0; c < C; ++c) {
        const T* plane = x + (b * C + c) * H * W;
        T* dst = y + (r * C + c) * ph_ * pw_;
        for (int64_t i = 0; i < ph_; ++i)
          for (int64_t j = 0; j < pw_; ++j) {
            int64_t h0 = std::clamp<int64_t>(static_cast<int64_t>(std::floor(i * bh)) + sh, 0, H);
            int64_t h1 = std::clamp<int64_t>(static_cast<int64_t>(std::ceil((i + 1) * bh)) + sh, 0, H);
            int64_t w0 = std::clamp<int64_t>(static_cast<int64_t>(std::floor(j * bw)) + sw, 0, W);
            int64_t w1 = std::clamp<int64_t>(static_cast<int64_t>(std::ceil((j + 1) * bw)) + sw, 0, W);
            bool empty = h1 <= h0 || w1 <= w0;
            T m = empty ? T(0) : plane[h0 * W + w0];
            for (int64_t h = h0; h < h1; ++h)
              for (int64_t w = w0; w < w1; ++w) m = std::max(m, plane[h * W + w]);
            dst[i * pw_ + j] = m;
          }
      }
    }
  }
  // A corner rounded to the map's grid and held within 2^40 of the origin, far past any map,
  // so that sums of corners cannot overflow; a region reaching further is pooled as if it ended
  // there.
  static int64_t map_coordinate(double v) {
    constexpr double kFar = 1099511627776.0;
    return static_cast<int64_t>(std::clamp(std::round(v), -kFar, kFar));
  }

  int64_t ph_ = 1, pw_ = 1;
  float scale_ = 1.0f;
};

}  // namespace

void register_roi_pool(Registry& r) {
  const std::vector<DType> float_types = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};
  r.add({"RoiAlign", "", 10, 1000, 0, float_types, [](const KernelSpec& s) { return std::make_unique<RoiAlign>(s); }});
  r.add(
      {"MaxRoiPool", "", 1, 1000, 0, float_types, [](const KernelSpec& s) { return std::make_unique<MaxRoiPool>(s); }});
}

}  // namespace mminfer::kernels
