// GridSample over N,C,H,W inputs: bilinear, nearest or bicubic sampling at normalized grid
// coordinates, with zeros, border or reflection padding.
#include <cmath>

#include "core/parallel.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/common/resample_float_io.h"

namespace mminfer::kernels {

namespace {

enum class GridMode { kLinear, kNearest, kCubic };
enum class GridPad { kZeros, kBorder, kReflection };

// Folds x back into [lo, hi] by mirroring at the ends, as often as needed.
double reflect(double x, double lo, double hi) {
  double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    double d = lo - x;
    int64_t n = static_cast<int64_t>(d / range);
    double r = d - static_cast<double>(n) * range;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    double d = x - hi;
    int64_t n = static_cast<int64_t>(d / range);
    double r = d - static_cast<double>(n) * range;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

class GridSample final : public Kernel {
 public:
  explicit GridSample(const KernelSpec& spec) {
    const Attributes& a = spec.a();
    std::string mode = a.get_string("mode", spec.opset >= 20 ? "linear" : "bilinear");
    if (mode == "bilinear" || mode == "linear")
      mode_ = GridMode::kLinear;
    else if (mode == "nearest")
      mode_ = GridMode::kNearest;
    else if (mode == "bicubic" || mode == "cubic")
      mode_ = GridMode::kCubic;
    else
      fail("attribute mode has unknown value '" + mode + "'");
    std::string pad = a.get_string("padding_mode", "zeros");
    if (pad == "zeros")
      pad_ = GridPad::kZeros;
    else if (pad == "border")
      pad_ = GridPad::kBorder;
    else if (pad == "reflection")
      pad_ = GridPad::kReflection;
    else
      fail("attribute padding_mode has unknown value '" + pad + "'");
    align_corners_ = a.get_int("align_corners", 0) != 0;
  }

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "X");
    const Tensor& g = need_input(in, 1, "grid");
    if (x.rank() != 4) fail("input X must be 4-D (N, C, H, W), got " + shape_str(x.shape()));
    if (g.rank() != 4 || g.dim(3) != 2 || g.dim(0) != x.dim(0))
      fail("input grid must be (N, H_out, W_out, 2) with N of X, got " + shape_str(g.shape()));
    out[0] = {x.dtype(), {x.dim(0), x.dim(1), g.dim(1), g.dim(2)}};
  }

  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    std::vector<float> grid = load_floats(*in[1]);
    if (out[0]->numel() == 0) return;
    if (x.dim(2) == 0 || x.dim(3) == 0) fail("input X has an empty spatial dim");
    with_float_data(x, *out[0], [&](auto* xs, auto* ys) { compute(xs, ys, x.shape(), in[1]->shape(), grid); });
  }

 private:
  double denormalize(double v, int64_t len) const {
    return align_corners_ ? (v + 1) / 2 * static_cast<double>(len - 1) : ((v + 1) * static_cast<double>(len) - 1) / 2;
  }

  template <typename T>
  double pixel(const T* plane, int64_t H, int64_t W, int64_t r, int64_t c) const {
    if (pad_ == GridPad::kZeros) {
      if (r < 0 || r >= H || c < 0 || c >= W) return 0.0;
    } else if (pad_ == GridPad::kBorder) {
      r = std::clamp<int64_t>(r, 0, H - 1);
      c = std::clamp<int64_t>(c, 0, W - 1);
    } else {
      double lo_x = align_corners_ ? 0.0 : -0.5, hi_x = align_corners_ ? double(W - 1) : double(W) - 0.5;
      double lo_y = align_corners_ ? 0.0 : -0.5, hi_y = align_corners_ ? double(H - 1) : double(H) - 0.5;
      c = std::clamp<int64_t>(static_cast<int64_t>(reflect(double(c), lo_x, hi_x)), 0, W - 1);
      r = std::clamp<int64_t>(static_cast<int64_t>(reflect(double(r), lo_y, hi_y)), 0, H - 1);
    }
    return static_cast<double>(plane[r * W + c]);
  }

  static void cubic_coeffs(double t, double w[4]) {
    const double a = -0.75;
    double x = t + 1;
    w[0] = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    w[1] = ((a + 2) * t - (a + 3)) * t * t + 1;
    x = 1 - t;
    w[2] = ((a + 2) * x - (a + 3)) * x * x + 1;
    x = 2 - t;
    w[3] = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  }

  template <typename T>
  void compute(const T* x, T* y, const Shape& xs, const Shape& gs, const std::vector<float>& grid) const {
    const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], OH = gs[1], OW = gs[2];
    double lo_x = align_corners_ ? 0.0 : -0.5, hi_x = align_corners_ ? double(W - 1) : double(W) - 0.5;
    double lo_y = align_corners_ ? 0.0 : -0.5, hi_y = align_corners_ ? double(H - 1) : double(H) - 0.5;
    parallel_for(N * C, 1, [&](int64_t begin, int64_t end) {
      for (int64_t nc = begin; nc < end; ++nc) {
        int64_t n = nc / C;
        const T* plane = x + nc * H * W;
        const float* g = grid.data() + n * OH * OW * 2;
        T* dst = y + nc * OH * OW;
        for (int64_t i = 0; i < OH * OW; ++i) {
          double px = denormalize(g[2 * i], W), py = denormalize(g[2 * i + 1], H);
          if (mode_ != GridMode::kCubic) {
            if (pad_ == GridPad::kBorder) {
              px = std::clamp(px, 0.0, double(W - 1));
              py = std::clamp(py, 0.0, double(H - 1));
            } else if (pad_ == GridPad::kReflection) {
              px = reflect(px, lo_x, hi_x);
              py = reflect(py, lo_y, hi_y);
            }
          }
          double v;
          if (std::isnan(px) || std::isnan(py)) {
            v = 0.0;
          } else if (mode_ == GridMode::kNearest) {
            v = pixel(plane, H, W, static_cast<int64_t>(std::nearbyint(py)), static_cast<int64_t>(std::nearbyint(px)));
          } else if (mode_ == GridMode::kLinear) {
            double fx = std::floor(px), fy = std::floor(py);
            int64_t x0 = static_cast<int64_t>(fx), y0 = static_cast<int64_t>(fy);
            double tx = px - fx, ty = py - fy;
            v = (1 - ty) * ((1 - tx) * pixel(plane, H, W, y0, x0) + tx * pixel(plane, H, W, y0, x0 + 1)) +
                ty * ((1 - tx) * pixel(plane, H, W, y0 + 1, x0) + tx * pixel(plane, H, W, y0 + 1, x0 + 1));
          } else {
            double fx = std::floor(px), fy = std::floor(py);
            int64_t x0 = static_cast<int64_t>(fx) - 1, y0 = static_cast<int64_t>(fy) - 1;
            double wx[4], wy[4];
            cubic_coeffs(px - fx, wx);
            cubic_coeffs(py - fy, wy);
            v = 0;
            for (int r = 0; r < 4; ++r) {
              double row = 0;
              for (int c = 0; c < 4; ++c) row += wx[c] * pixel(plane, H, W, y0 + r, x0 + c);
              v += wy[r] * row;
            }
          }
          dst[i] = static_cast<T>(v);
        }
      }
    });
  }

  GridMode mode_ = GridMode::kLinear;
  GridPad pad_ = GridPad::kZeros;
  bool align_corners_ = false;
};

}  // namespace

void register_grid_sample(Registry& r) {
  const std::vector<DType> float_types = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};
  r.add({"GridSample", "", 16, 1000, 0, float_types,
         [](const KernelSpec& s) { return std::make_unique<GridSample>(s); }});
}

}  // namespace mminfer::kernels
