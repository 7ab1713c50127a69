#include "kernels/cpu/quantization/quantize_rows.h"

#include <immintrin.h>

#include <cmath>
#include <limits>
#include <mutex>

#include "core/parallel.h"

namespace mminfer::kernels {

namespace {

struct Range {
  float lo = 0.f, hi = 0.f;  // start at 0: the range always holds it
  bool bad = false;          // NaN or ±inf seen
  void merge(const Range& r) {
    lo = r.lo < lo ? r.lo : lo;
    hi = r.hi > hi ? r.hi : hi;
    bad = bad || r.bad;
  }
};

// Shared by both twins so they quantize identically. Dividing before subtracting keeps
// hi - lo from overflowing on huge ranges.
QuantGrid params_of(const Range& r) {
  if (r.bad) return {std::numeric_limits<float>::quiet_NaN(), 0.f, 0};
  float scale = r.hi / 255.f - r.lo / 255.f;
  if (!(scale >= kMinQuantScale)) scale = kMinQuantScale;
  float inv = 1.f / scale;
  float zp = std::nearbyint(-r.lo * inv);
  zp = zp > 0.f ? (zp < 255.f ? zp : 255.f) : 0.f;
  return {scale, inv, static_cast<int32_t>(zp)};
}

// The scalar quantizer of one value; NaN lands on 0, as the vector path's saturation does.
inline uint8_t quantize_one(float x, float inv, int32_t zp) {
  float v = std::nearbyint(x * inv) + static_cast<float>(zp);
  v = v > 0.f ? (v < 255.f ? v : 255.f) : 0.f;
  return static_cast<uint8_t>(v);
}

Range range_reference(const float* x, int64_t n) {
  Range r;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) r.bad = true;
    else if (x[i] < r.lo) r.lo = x[i];
    else if (x[i] > r.hi) r.hi = x[i];
  }
  return r;
}

// ---- AVX2 ----

inline float hmin(__m256 v) {
  __m128 m = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_min_ps(m, _mm_movehl_ps(m, m));
  m = _mm_min_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}
inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

Range range_avx2(const float* x, int64_t n) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  __m256 lo0 = _mm256_setzero_ps(), lo1 = lo0, hi0 = lo0, hi1 = lo0, bad = lo0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    lo0 = _mm256_min_ps(lo0, a), hi0 = _mm256_max_ps(hi0, a);
    lo1 = _mm256_min_ps(lo1, b), hi1 = _mm256_max_ps(hi1, b);
    // |v| < inf is false exactly for NaN and ±inf.
    __m256 fin = _mm256_and_ps(_mm256_cmp_ps(_mm256_and_ps(a, abs_mask), inf, _CMP_LT_OQ),
                               _mm256_cmp_ps(_mm256_and_ps(b, abs_mask), inf, _CMP_LT_OQ));
    bad = _mm256_or_ps(bad, _mm256_xor_ps(fin, _mm256_castsi256_ps(_mm256_set1_epi32(-1))));
  }
  Range r{hmin(_mm256_min_ps(lo0, lo1)), hmax(_mm256_max_ps(hi0, hi1)), _mm256_movemask_ps(bad) != 0};
  r.merge(range_reference(x + i, n - i));
  return r;
}

void quantize_avx2(const float* x, int64_t n, const QuantGrid& p, uint8_t* q) {
  const __m256 inv = _mm256_set1_ps(p.inv);
  const __m256i zp = _mm256_set1_epi32(p.zero_point);
  // packs/packus work within 128-bit lanes; this puts the 32 bytes back in order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  auto ints = [&](const float* s) { return _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(s), inv)), zp); };
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i ab = _mm256_packs_epi32(ints(x + i), ints(x + i + 8));
    __m256i cd = _mm256_packs_epi32(ints(x + i + 16), ints(x + i + 24));
    __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(ab, cd), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + i), bytes);
  }
  for (; i < n; ++i) q[i] = quantize_one(x[i], p.inv, p.zero_point);
}

template <typename RangeFn, typename QuantFn>
void quantize_with(const float* x, int64_t rows, int64_t cols, bool per_tensor, const QuantizedRows& out,
                   RangeFn range, QuantFn quant, bool threaded, const StaticRange* fixed) {
  int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1));
  auto loop = [&](auto&& body) {
    if (threaded) parallel_for(rows, grain, body);
    else body(int64_t(0), rows);
  };
  if (per_tensor || fixed) {
    Range all;
    if (fixed) {
      all.merge(Range{fixed->lo, fixed->hi, !std::isfinite(fixed->lo) || !std::isfinite(fixed->hi)});
    } else {
      std::mutex mu;
      loop([&](int64_t r0, int64_t r1) {
        Range part;
        for (int64_t r = r0; r < r1; ++r) part.merge(range(x + r * cols, cols));
        std::lock_guard<std::mutex> lock(mu);
        all.merge(part);
      });
    }
    QuantGrid p = params_of(all);
    loop([&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        quant(x + r * cols, cols, p, out.q + r * cols);
        out.scale[r] = p.scale, out.zero_point[r] = p.zero_point;
      }
    });
    return;
  }
  loop([&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      QuantGrid p = params_of(range(x + r * cols, cols));  // the row stays in L1 for the second sweep
      quant(x + r * cols, cols, p, out.q + r * cols);
      out.scale[r] = p.scale, out.zero_point[r] = p.zero_point;
    }
  });
}

}  // namespace

void quantize_u8(const float* x, int64_t rows, int64_t cols, bool per_tensor, const QuantizedRows& out,
                 const StaticRange* fixed) {
  quantize_with(x, rows, cols, per_tensor, out, range_avx2, quantize_avx2, true, fixed);
}

void quantize_u8_reference(const float* x, int64_t rows, int64_t cols, bool per_tensor, const QuantizedRows& out,
                           const StaticRange* fixed) {
  auto quant = [](const float* s, int64_t n, const QuantGrid& p, uint8_t* q) {
    for (int64_t i = 0; i < n; ++i) q[i] = quantize_one(s[i], p.inv, p.zero_point);
  };
  quantize_with(x, rows, cols, per_tensor, out, range_reference, quant, false, fixed);
}

QuantGrid quant_grid(float lo, float hi, bool bad) { return params_of(Range{std::fmin(lo, 0.f), std::fmax(hi, 0.f), bad}); }

ValueRange value_range(const float* x, int64_t n) {
  Range all;
  std::mutex mu;
  parallel_for(n, 1 << 15, [&](int64_t i0, int64_t i1) {
    Range part = range_avx2(x + i0, i1 - i0);
    std::lock_guard<std::mutex> lock(mu);
    all.merge(part);
  });
  return {all.lo, all.hi, all.bad};
}

ValueRange value_range_reference(const float* x, int64_t n) {
  Range r = range_reference(x, n);
  return {r.lo, r.hi, r.bad};
}

void quantize_values_u8(const float* x, int64_t n, const QuantGrid& grid, uint8_t* q) {
  parallel_for(n, 1 << 15, [&](int64_t i0, int64_t i1) { quantize_avx2(x + i0, i1 - i0, grid, q + i0); });
}

uint8_t quantize_value_u8(float x, const QuantGrid& grid) { return quantize_one(x, grid.inv, grid.zero_point); }

}  // namespace mminfer::kernels
