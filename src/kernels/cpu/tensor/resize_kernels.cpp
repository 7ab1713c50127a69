#include "kernels/cpu/tensor/resize_kernels.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "core/parallel.h"

namespace mminfer::kernels {

bool ResizeAxis::identity() const {
  if (in != out) return false;
  for (int64_t o = 0; o < out; ++o) {
    if (outside[o]) return false;
    int64_t hits = 0;
    for (int64_t k = first[o]; k < first[o + 1]; ++k) {
      if (weight[k] == 0.0f) continue;
      if (index[k] != o || weight[k] != 1.0f) return false;
      ++hits;
    }
    if (hits != 1) return false;
  }
  return true;
}

Shape ResizePlan::out_shape() const {
  Shape s;
  for (const ResizeAxis& a : axes) s.push_back(a.out);
  return s;
}

namespace {

double to_original(double x, double scale, int64_t in, int64_t out, double roi_start, double roi_end,
                   const std::string& mode) {
  // The resized length is in * scale, which is fractional when scales (not sizes) are given.
  double fin = static_cast<double>(in), fout = fin * scale;
  if (mode == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (mode == "half_pixel_symmetric") {
    double adjustment = static_cast<double>(out) / fout;
    double offset = fin / 2 * (1 - adjustment);
    return offset + (x + 0.5) / scale - 0.5;
  }
  if (mode == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (mode == "align_corners") return out == 1 ? 0.0 : x * (fin - 1) / (fout - 1);
  if (mode == "asymmetric") return x / scale;
  if (mode == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  if (mode == "tf_crop_and_resize")
    return out > 1 ? roi_start * (fin - 1) + x * (roi_end - roi_start) * (fin - 1) / (static_cast<double>(out) - 1)
                   : 0.5 * (roi_start + roi_end) * (fin - 1);
  fail("attribute coordinate_transformation_mode has unknown value '" + mode + "'");
}

int64_t nearest_index(double x, double scale, const std::string& mode) {
  double f = std::floor(x);
  if (mode == "round_prefer_floor") return static_cast<int64_t>(x == f + 0.5 ? f : std::round(x));
  if (mode == "round_prefer_ceil") return static_cast<int64_t>(x == f + 0.5 ? f + 1 : std::round(x));
  if (mode == "floor") return static_cast<int64_t>(f);
  if (mode == "ceil") return static_cast<int64_t>(std::ceil(x));
  if (mode == "simple") return static_cast<int64_t>(scale < 1 ? std::ceil(x) : std::trunc(x));
  fail("attribute nearest_mode has unknown value '" + mode + "'");
}

double cubic_weight(double d, double a) {
  d = std::abs(d);
  if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0.0;
}

// Linear or cubic taps around x: offsets j from floor(x) with their filter weights.
void filter_taps(double x, double scale, const ResizeConfig& cfg, int64_t in, std::vector<int64_t>& idx,
                 std::vector<double>& w) {
  double f = std::floor(x), t = x - f;
  int64_t base = static_cast<int64_t>(f);
  double s = cfg.antialias ? std::min(scale, 1.0) : 1.0;
  bool linear = cfg.mode == ResizeMode::kLinear;
  double support = linear ? 1.0 : 2.0;
  int64_t start = static_cast<int64_t>(std::floor(-support / s)) + 1;
  int64_t stop = 2 - start;  // exclusive: taps are symmetric around the gap [base, base + 1]
  idx.clear();
  w.clear();
  for (int64_t j = start; j < stop; ++j) {
    double d = (static_cast<double>(j) - t) * s;
    double wt = linear ? std::max(0.0, 1 - std::abs(d)) : cubic_weight(d, cfg.cubic_a);
    int64_t i = base + j;
    if (cfg.exclude_outside && (i < 0 || i >= in)) wt = 0;
    idx.push_back(std::clamp<int64_t>(i, 0, in - 1));
    w.push_back(wt);
  }
  if (cfg.antialias || cfg.exclude_outside) {
    double sum = 0;
    for (double v : w) sum += v;
    if (sum != 0)
      for (double& v : w) v /= sum;
  }
}

template <typename T>
void resize_general(const T* x, T* y, const ResizePlan& plan) {
  const size_t rank = plan.axes.size();
  if (rank == 0) {
    y[0] = x[0];
    return;
  }
  std::vector<int64_t> in_stride(rank, 1);
  for (size_t d = rank; d-- > 1;) in_stride[d - 1] = in_stride[d] * plan.axes[d].in;
  const ResizeAxis& last = plan.axes[rank - 1];
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < rank; ++d) rows *= plan.axes[d].out;
  const T extra = static_cast<T>(plan.extrapolation_value);
  parallel_for(rows, 4, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> o(rank, 0);
    for (int64_t row = begin; row < end; ++row) {
      int64_t rem = row;
      for (size_t d = rank - 1; d-- > 0;) {
        o[d] = rem % plan.axes[d].out;
        rem /= plan.axes[d].out;
      }
      bool row_outside = false;
      for (size_t d = 0; d + 1 < rank; ++d) row_outside |= plan.axes[d].outside[o[d]] != 0;
      T* dst = y + row * last.out;
      for (int64_t ol = 0; ol < last.out; ++ol) {
        if (row_outside || last.outside[ol]) {
          dst[ol] = extra;
          continue;
        }
        o[rank - 1] = ol;
        // Sum over the product of all axes' taps, outer axis first.
        auto accumulate = [&](auto&& self, size_t d, int64_t offset) -> double {
          if (d == rank) return static_cast<double>(x[offset]);
          const ResizeAxis& a = plan.axes[d];
          double sum = 0;
          for (int64_t k = a.first[o[d]]; k < a.first[o[d] + 1]; ++k) {
            if (a.weight[k] == 0.0f) continue;
            sum += static_cast<double>(a.weight[k]) * self(self, d + 1, offset + a.index[k] * in_stride[d]);
          }
          return sum;
        };
        dst[ol] = static_cast<T>(accumulate(accumulate, 0, 0));
      }
    }
  });
}

}  // namespace

ResizePlan plan_resize(const Shape& in, const Shape& out, const std::vector<double>& scales,
                       const std::vector<double>& roi, const ResizeConfig& cfg) {
  ResizePlan plan;
  plan.mode = cfg.mode;
  plan.extrapolation_value = cfg.extrapolation_value;
  const size_t rank = in.size();
  bool crop = cfg.coordinate_mode == "tf_crop_and_resize";
  if (crop && roi.size() != 2 * rank) fail("input roi must have 2 * rank values for tf_crop_and_resize");
  std::vector<int64_t> ti;
  std::vector<double> tw;
  for (size_t d = 0; d < rank; ++d) {
    ResizeAxis a;
    a.in = in[d];
    a.out = out[d];
    if (a.out > 0 && a.in <= 0) fail("cannot resize an empty axis " + std::to_string(d) + " to a non-empty one");
    double scale = scales[d];
    if (!(scale > 0)) fail("scale of axis " + std::to_string(d) + " must be positive");
    a.first.push_back(0);
    for (int64_t o = 0; o < a.out; ++o) {
      double xo = to_original(static_cast<double>(o), scale, a.in, a.out, crop ? roi[d] : 0.0,
                              crop ? roi[d + rank] : 1.0, cfg.coordinate_mode);
      bool outside = crop && (xo < 0 || xo > static_cast<double>(a.in - 1));
      a.outside.push_back(outside);
      if (!outside) {
        if (cfg.mode == ResizeMode::kNearest) {
          a.index.push_back(std::clamp<int64_t>(nearest_index(xo, scale, cfg.nearest_mode), 0, a.in - 1));
          a.weight.push_back(1.0f);
        } else {
          filter_taps(xo, scale, cfg, a.in, ti, tw);
          for (size_t k = 0; k < ti.size(); ++k) {
            a.index.push_back(ti[k]);
            a.weight.push_back(static_cast<float>(tw[k]));
          }
        }
      }
      a.first.push_back(static_cast<int64_t>(a.index.size()));
    }
    plan.axes.push_back(std::move(a));
  }
  return plan;
}

void resize_general_f32(const float* x, float* y, const ResizePlan& plan) { resize_general<float>(x, y, plan); }
void resize_general_f64(const double* x, double* y, const ResizePlan& plan) { resize_general<double>(x, y, plan); }

void resize_nearest_bytes(const void* x, void* y, size_t es, const void* fill, const ResizePlan& plan) {
  const size_t rank = plan.axes.size();
  const char* xs = static_cast<const char*>(x);
  char* ys = static_cast<char*>(y);
  if (rank == 0) {
    std::memcpy(ys, xs, es);
    return;
  }
  std::vector<int64_t> in_stride(rank, 1);
  for (size_t d = rank; d-- > 1;) in_stride[d - 1] = in_stride[d] * plan.axes[d].in;
  int64_t total = shape_numel(plan.out_shape());
  std::vector<int64_t> o(rank, 0);
  for (int64_t i = 0; i < total; ++i) {
    bool outside = false;
    int64_t off = 0;
    for (size_t d = 0; d < rank; ++d) {
      const ResizeAxis& a = plan.axes[d];
      if (a.outside[o[d]]) {
        outside = true;
        break;
      }
      off += a.index[a.first[o[d]]] * in_stride[d];
    }
    std::memcpy(ys + i * es, outside ? static_cast<const char*>(fill) : xs + off * es, es);
    for (size_t d = rank; d-- > 0;) {
      if (++o[d] < plan.axes[d].out) break;
      o[d] = 0;
    }
  }
}

namespace {

// Two-tap table of one axis for the linear fast path; false if some output has other taps.
bool two_taps(const ResizeAxis& a, std::vector<int32_t>& i0, std::vector<int32_t>& i1, std::vector<float>& w0,
              std::vector<float>& w1) {
  for (int64_t o = 0; o < a.out; ++o) {
    if (a.first[o + 1] - a.first[o] != 2) return false;
    int64_t k = a.first[o];
    i0.push_back(static_cast<int32_t>(a.index[k]));
    i1.push_back(static_cast<int32_t>(a.index[k + 1]));
    w0.push_back(a.weight[k]);
    w1.push_back(a.weight[k + 1]);
  }
  return true;
}

void nearest_row(const float* src, float* dst, const int32_t* ix, int64_t ow_count, bool twice) {
  int64_t ow = 0;
  if (twice) {
    for (; ow + 16 <= ow_count; ow += 16) {
      __m256 a = _mm256_loadu_ps(src + ow / 2);
      __m256 lo = _mm256_unpacklo_ps(a, a), hi = _mm256_unpackhi_ps(a, a);
      _mm256_storeu_ps(dst + ow, _mm256_permute2f128_ps(lo, hi, 0x20));
      _mm256_storeu_ps(dst + ow + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
    }
  } else {
    for (; ow + 8 <= ow_count; ow += 8)
      _mm256_storeu_ps(dst + ow,
                       _mm256_i32gather_ps(src, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ix + ow)), 4));
  }
  for (; ow < ow_count; ++ow) dst[ow] = src[ix[ow]];
}

void linear_row(const float* src, float* dst, const int32_t* i0, const int32_t* i1, const float* w0, const float* w1,
                int64_t n) {
  int64_t o = 0;
  for (; o + 8 <= n; o += 8) {
    __m256 a = _mm256_i32gather_ps(src, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(i0 + o)), 4);
    __m256 b = _mm256_i32gather_ps(src, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(i1 + o)), 4);
    _mm256_storeu_ps(dst + o, _mm256_fmadd_ps(_mm256_loadu_ps(w1 + o), b, _mm256_mul_ps(_mm256_loadu_ps(w0 + o), a)));
  }
  for (; o < n; ++o) dst[o] = w0[o] * src[i0[o]] + w1[o] * src[i1[o]];
}

}  // namespace

bool resize2d_f32_fast(const float* x, float* y, const ResizePlan& plan) {
  const size_t rank = plan.axes.size();
  if (rank < 2 || plan.mode == ResizeMode::kCubic) return false;
  int64_t planes = 1;
  for (size_t d = 0; d + 2 < rank; ++d) {
    if (!plan.axes[d].identity()) return false;
    planes *= plan.axes[d].in;
  }
  const ResizeAxis& ah = plan.axes[rank - 2];
  const ResizeAxis& aw = plan.axes[rank - 1];
  for (const ResizeAxis* a : {&ah, &aw})
    for (uint8_t out : a->outside)
      if (out) return false;
  const int64_t H = ah.in, W = aw.in, OH = ah.out, OW = aw.out;
  if (W > (int64_t(1) << 30)) return false;
  if (planes == 0 || OH == 0 || OW == 0) return true;
  if (plan.mode == ResizeMode::kNearest) {
    std::vector<int32_t> ix(OW);
    bool twice = OW == 2 * W;
    for (int64_t o = 0; o < OW; ++o) {
      ix[o] = static_cast<int32_t>(aw.index[aw.first[o]]);
      twice &= ix[o] == o / 2;
    }
    parallel_for(planes * OH, 16, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        int64_t pl = r / OH, oh = r % OH;
        float* dst = y + r * OW;
        int64_t ih = ah.index[ah.first[oh]];
        if (r > begin && oh > 0 && ah.index[ah.first[oh - 1]] == ih) {
          std::memcpy(dst, dst - OW, static_cast<size_t>(OW) * sizeof(float));
          continue;
        }
        nearest_row(x + (pl * H + ih) * W, dst, ix.data(), OW, twice);
      }
    });
    return true;
  }
  std::vector<int32_t> x0, x1, y0, y1;
  std::vector<float> wx0, wx1, wy0, wy1;
  if (!two_taps(aw, x0, x1, wx0, wx1) || !two_taps(ah, y0, y1, wy0, wy1)) return false;
  parallel_for(planes, 1, [&](int64_t begin, int64_t end) {
    // Horizontally resampled source rows, cached because neighbouring output rows share them.
    std::vector<float> rows[2] = {std::vector<float>(OW), std::vector<float>(OW)};
    int64_t cached[2] = {-1, -1};
    // Returns the buffer holding row ih, filling one that is not `keep` on a miss.
    auto row_of = [&](const float* src, int64_t ih, int keep) -> int {
      for (int c = 0; c < 2; ++c)
        if (cached[c] == ih) return c;
      int c = keep == 0 ? 1 : keep == 1 ? 0 : (cached[0] < cached[1] ? 0 : 1);
      linear_row(src + ih * W, rows[c].data(), x0.data(), x1.data(), wx0.data(), wx1.data(), OW);
      cached[c] = ih;
      return c;
    };
    for (int64_t pl = begin; pl < end; ++pl) {
      const float* src = x + pl * H * W;
      cached[0] = cached[1] = -1;
      for (int64_t oh = 0; oh < OH; ++oh) {
        int c0 = row_of(src, y0[oh], -1);
        int c1 = row_of(src, y1[oh], c0);
        const float* r0 = rows[c0].data();
        const float* r1 = rows[c1].data();
        float* dst = y + (pl * OH + oh) * OW;
        __m256 a = _mm256_set1_ps(wy0[oh]), b = _mm256_set1_ps(wy1[oh]);
        int64_t o = 0;
        for (; o + 8 <= OW; o += 8)
          _mm256_storeu_ps(dst + o,
                           _mm256_fmadd_ps(b, _mm256_loadu_ps(r1 + o), _mm256_mul_ps(a, _mm256_loadu_ps(r0 + o))));
        for (; o < OW; ++o) dst[o] = wy0[oh] * r0[o] + wy1[oh] * r1[o];
      }
    }
  });
  return true;
}

}  // namespace mminfer::kernels
