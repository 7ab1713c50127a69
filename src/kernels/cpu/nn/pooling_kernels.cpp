#include "kernels/cpu/nn/pooling_kernels.h"

#include <immintrin.h>

#include <cmath>
#include <limits>

#include "core/parallel.h"

namespace mminfer::kernels {

int64_t PoolParams::in_plane() const { return shape_numel(in); }
int64_t PoolParams::out_plane() const { return shape_numel(out); }

PoolParams make_pool_params(const Shape& x, const Attributes& a, PoolKind kind, bool allow_dilations,
                            bool allow_ceil_mode) {
  if (x.size() < 3) fail("input X must have rank >= 3 (N, C, spatial...), got " + shape_str(x));
  size_t nd = x.size() - 2;
  PoolParams p;
  p.kind = kind;
  p.in.assign(x.begin() + 2, x.end());
  p.kernel = a.get_ints("kernel_shape");
  if (p.kernel.size() != nd)
    fail("attribute kernel_shape must have " + std::to_string(nd) + " values for input " + shape_str(x));
  p.stride = a.get_ints("strides", std::vector<int64_t>(nd, 1));
  p.dilation = allow_dilations ? a.get_ints("dilations", std::vector<int64_t>(nd, 1)) : std::vector<int64_t>(nd, 1);
  std::vector<int64_t> pads = a.get_ints("pads", std::vector<int64_t>(2 * nd, 0));
  if (p.stride.size() != nd) fail("attribute strides must have " + std::to_string(nd) + " values");
  if (p.dilation.size() != nd) fail("attribute dilations must have " + std::to_string(nd) + " values");
  if (pads.size() != 2 * nd) fail("attribute pads must have " + std::to_string(2 * nd) + " values");
  std::string auto_pad = a.get_string("auto_pad", "NOTSET");
  bool ceil_mode = allow_ceil_mode && a.get_int("ceil_mode", 0) != 0;
  p.pad_begin.assign(pads.begin(), pads.begin() + nd);
  p.pad_end.assign(pads.begin() + nd, pads.end());
  p.out.resize(nd);
  for (size_t d = 0; d < nd; ++d) {
    if (p.kernel[d] < 1 || p.stride[d] < 1 || p.dilation[d] < 1)
      fail("kernel_shape, strides and dilations must be positive");
    if (p.pad_begin[d] < 0 || p.pad_end[d] < 0) fail("attribute pads must not be negative");
    int64_t in = p.in[d], s = p.stride[d];
    int64_t extent = (p.kernel[d] - 1) * p.dilation[d] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      int64_t out = (in + s - 1) / s;
      int64_t total = std::max<int64_t>(0, (out - 1) * s + extent - in);
      p.pad_begin[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      p.pad_end[d] = total - p.pad_begin[d];
      p.out[d] = out;
    } else if (auto_pad == "VALID") {
      p.pad_begin[d] = p.pad_end[d] = 0;
      if (in < extent)
        fail("pooling window " + std::to_string(extent) + " is larger than input dim " + std::to_string(in));
      p.out[d] = (in - extent) / s + 1;
    } else if (auto_pad == "NOTSET" || auto_pad.empty()) {
      int64_t span = in + p.pad_begin[d] + p.pad_end[d] - extent;
      if (span < 0)
        fail("pooling window " + std::to_string(extent) + " is larger than padded input dim " +
             std::to_string(in + p.pad_begin[d] + p.pad_end[d]));
      int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
      // A window may not start inside the end padding only (PyTorch and ONNX agree).
      if (ceil_mode && (out - 1) * s >= in + p.pad_begin[d]) --out;
      p.out[d] = out;
    } else {
      fail("attribute auto_pad has unknown value '" + auto_pad + "'");
    }
  }
  return p;
}

namespace {

template <typename T>
void pool_reference(const T* x, T* y, int64_t* indices, int64_t planes, const PoolParams& p, bool column_major) {
  size_t nd = p.nd();
  int64_t in_plane = p.in_plane(), out_plane = p.out_plane();
  // Row-major strides of the spatial input, and the strides used for reported indices.
  std::vector<int64_t> in_stride(nd, 1), idx_stride(nd, 1);
  for (size_t d = nd; d-- > 1;) in_stride[d - 1] = in_stride[d] * p.in[d];
  for (size_t d = 1; d < nd; ++d) idx_stride[d] = idx_stride[d - 1] * p.in[d - 1];
  if (!column_major) idx_stride = in_stride;
  int64_t window = shape_numel(p.kernel);
  parallel_for(planes, 1, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> o(nd), k(nd), start(nd);
    for (int64_t pl = begin; pl < end; ++pl) {
      const T* xp = x + pl * in_plane;
      std::fill(o.begin(), o.end(), 0);
      for (int64_t oi = 0; oi < out_plane; ++oi) {
        for (size_t d = 0; d < nd; ++d) start[d] = o[d] * p.stride[d] - p.pad_begin[d];
        std::fill(k.begin(), k.end(), 0);
        T best = std::numeric_limits<T>::lowest();
        if constexpr (std::numeric_limits<T>::has_infinity) best = -std::numeric_limits<T>::infinity();
        int64_t best_idx = -1;
        double sum = 0;
        int64_t valid = 0, padded = 0;
        for (int64_t w = 0; w < window; ++w) {
          bool inside = true, inside_pad = true;
          int64_t off = 0, ioff = 0;
          for (size_t d = 0; d < nd; ++d) {
            int64_t c = start[d] + k[d] * p.dilation[d];
            if (c < 0 || c >= p.in[d]) inside = false;
            if (c < -p.pad_begin[d] || c >= p.in[d] + p.pad_end[d]) inside_pad = false;
            off += c * in_stride[d];
            ioff += c * idx_stride[d];
          }
          padded += inside_pad;
          if (inside) {
            T v = xp[off];
            ++valid;
            if (p.kind == PoolKind::kMax) {
              // First occurrence wins; NaN never replaces a value (as max_ps(v, best) does).
              if (v > best || best_idx < 0) {
                if (v > best) best = v;
                best_idx = ioff;
              }
            } else if (p.kind == PoolKind::kAverage) {
              sum += static_cast<double>(v);
            } else {
              sum += std::pow(std::abs(static_cast<double>(v)), static_cast<double>(p.p));
            }
          }
          for (size_t d = nd; d-- > 0;) {
            if (++k[d] < p.kernel[d]) break;
            k[d] = 0;
          }
        }
        T* yo = y + pl * out_plane + oi;
        if (p.kind == PoolKind::kMax) {
          *yo = best;
          if (indices) indices[pl * out_plane + oi] = pl * in_plane + std::max<int64_t>(best_idx, 0);
        } else if (p.kind == PoolKind::kAverage) {
          int64_t count = p.count_include_pad ? padded : valid;
          *yo = static_cast<T>(count > 0 ? sum / static_cast<double>(count) : 0.0);
        } else {
          *yo = static_cast<T>(std::pow(sum, 1.0 / static_cast<double>(p.p)));
        }
        for (size_t d = nd; d-- > 0;) {
          if (++o[d] < p.out[d]) break;
          o[d] = 0;
        }
      }
    }
  });
}

// Number of window taps along one dim that land inside [lo, hi).
int64_t taps_inside(int64_t start, int64_t kernel, int64_t dilation, int64_t lo, int64_t hi) {
  int64_t n = 0;
  for (int64_t k = 0; k < kernel; ++k) {
    int64_t c = start + k * dilation;
    n += c >= lo && c < hi;
  }
  return n;
}

}  // namespace

void pool_reference_f32(const float* x, float* y, int64_t* indices, int64_t planes, const PoolParams& p,
                        bool column_major_indices) {
  pool_reference<float>(x, y, indices, planes, p, column_major_indices);
}
void pool_reference_f64(const double* x, double* y, int64_t* indices, int64_t planes, const PoolParams& p,
                        bool column_major_indices) {
  pool_reference<double>(x, y, indices, planes, p, column_major_indices);
}

void pool_reference_i8(const int8_t* x, int8_t* y, int64_t* indices, int64_t planes, const PoolParams& p,
                       bool column_major_indices) {
  pool_reference<int8_t>(x, y, indices, planes, p, column_major_indices);
}
void pool_reference_u8(const uint8_t* x, uint8_t* y, int64_t* indices, int64_t planes, const PoolParams& p,
                       bool column_major_indices) {
  pool_reference<uint8_t>(x, y, indices, planes, p, column_major_indices);
}

bool pool2d_f32_avx2(const float* x, float* y, int64_t planes, const PoolParams& p) {
  if (p.nd() != 2 || p.kind == PoolKind::kLp) return false;
  const int64_t H = p.in[0], W = p.in[1], OH = p.out[0], OW = p.out[1];
  const int64_t KH = p.kernel[0], KW = p.kernel[1], SH = p.stride[0], SW = p.stride[1];
  const int64_t DH = p.dilation[0], DW = p.dilation[1], PT = p.pad_begin[0], PL = p.pad_begin[1];
  if (OH <= 0 || OW <= 0) return true;
  if (SW * (OW + 8) > (int64_t(1) << 30)) return false;  // gather offsets are int32
  const bool is_max = p.kind == PoolKind::kMax;
  // Padded plane big enough for every window, so the inner loops never test bounds.
  const int64_t HP = std::max(H + PT, (OH - 1) * SH + (KH - 1) * DH + 1);
  const int64_t WP = std::max(W + PL, (OW - 1) * SW + (KW - 1) * DW + 1) + 8 * SW;
  const bool need_pad = PT != 0 || PL != 0 || HP != H || WP != W;
  // Divisors are separable: per-row count times per-column count.
  std::vector<float> inv_h(OH), inv_w(OW);
  if (!is_max) {
    for (int64_t o = 0; o < OH; ++o) {
      int64_t s = o * SH - PT;
      int64_t n = p.count_include_pad ? taps_inside(s, KH, DH, -PT, H + p.pad_end[0]) : taps_inside(s, KH, DH, 0, H);
      inv_h[o] = n > 0 ? 1.0f / static_cast<float>(n) : 0.0f;
    }
    for (int64_t o = 0; o < OW; ++o) {
      int64_t s = o * SW - PL;
      int64_t n = p.count_include_pad ? taps_inside(s, KW, DW, -PL, W + p.pad_end[1]) : taps_inside(s, KW, DW, 0, W);
      inv_w[o] = n > 0 ? 1.0f / static_cast<float>(n) : 0.0f;
    }
  }
  const float fill = is_max ? -std::numeric_limits<float>::infinity() : 0.0f;
  parallel_for(planes, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> padded(need_pad ? static_cast<size_t>(HP * WP) : 0);
    std::vector<float> acc(static_cast<size_t>(OW + 8));
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i lane_step = _mm256_mullo_epi32(lane, _mm256_set1_epi32(static_cast<int>(SW)));
    for (int64_t pl = begin; pl < end; ++pl) {
      const float* src = x + pl * H * W;
      int64_t ld = W;
      if (need_pad) {
        std::fill(padded.begin(), padded.end(), fill);
        for (int64_t h = 0; h < H; ++h) std::copy(src + h * W, src + (h + 1) * W, padded.data() + (h + PT) * WP + PL);
        src = padded.data();
        ld = WP;
      }
      float* dst = y + pl * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh) {
        int64_t ow = 0;
        for (; ow + 8 <= OW; ow += 8) {
          __m256 a = _mm256_set1_ps(fill);
          for (int64_t kh = 0; kh < KH; ++kh) {
            const float* row = src + (oh * SH + kh * DH) * ld + ow * SW;
            for (int64_t kw = 0; kw < KW; ++kw) {
              __m256 v = SW == 1 ? _mm256_loadu_ps(row + kw * DW) : _mm256_i32gather_ps(row + kw * DW, lane_step, 4);
              a = is_max ? _mm256_max_ps(v, a) : _mm256_add_ps(a, v);
            }
          }
          if (!is_max) a = _mm256_mul_ps(_mm256_mul_ps(a, _mm256_set1_ps(inv_h[oh])), _mm256_loadu_ps(&inv_w[ow]));
          _mm256_storeu_ps(dst + oh * OW + ow, a);
        }
        for (; ow < OW; ++ow) {
          float a = fill;
          for (int64_t kh = 0; kh < KH; ++kh) {
            const float* row = src + (oh * SH + kh * DH) * ld + ow * SW;
            for (int64_t kw = 0; kw < KW; ++kw) {
              float v = row[kw * DW];
              a = is_max ? (v > a ? v : a) : a + v;
            }
          }
          dst[oh * OW + ow] = is_max ? a : a * inv_h[oh] * inv_w[ow];
        }
      }
    }
  });
  return true;
}

void global_average_f32_avx2(const float* x, float* y, int64_t planes, int64_t plane) {
  parallel_for(planes, 1, [&](int64_t begin, int64_t end) {
    for (int64_t pl = begin; pl < end; ++pl) {
      const float* s = x + pl * plane;
      __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
      int64_t i = 0;
      for (; i + 16 <= plane; i += 16) {
        a0 = _mm256_add_ps(a0, _mm256_loadu_ps(s + i));
        a1 = _mm256_add_ps(a1, _mm256_loadu_ps(s + i + 8));
      }
      a0 = _mm256_add_ps(a0, a1);
      __m128 h = _mm_add_ps(_mm256_castps256_ps128(a0), _mm256_extractf128_ps(a0, 1));
      h = _mm_hadd_ps(h, h);
      h = _mm_hadd_ps(h, h);
      double sum = _mm_cvtss_f32(h);
      for (; i < plane; ++i) sum += s[i];
      y[pl] = plane > 0 ? static_cast<float>(sum / static_cast<double>(plane)) : 0.0f;
    }
  });
}

}  // namespace mminfer::kernels
