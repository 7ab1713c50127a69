#include "kernels/cpu/math/reduce_simd.h"

#include <immintrin.h>

#include <cmath>
#include <limits>

#include "kernels/cpu/common/vector_math.h"

namespace mminfer::kernels::reduce_simd {

namespace {

using K = ReduceKind;
constexpr float kInf = std::numeric_limits<float>::infinity();

constexpr float identity(K k) {
  switch (k) {
    case K::kProd: return 1.0f;
    case K::kMax: case K::kLogSumExp: return -kInf;
    case K::kMin: return kInf;
    default: return 0.0f;
  }
}

// One accumulation step; max/min keep a NaN once they have seen one.
template <K kind>
inline float step(float acc, float x) {
  if constexpr (kind == K::kSumSquare || kind == K::kL2) return std::fma(x, x, acc);
  if constexpr (kind == K::kL1) return acc + std::fabs(x);
  if constexpr (kind == K::kProd) return acc * x;
  if constexpr (kind == K::kMax || kind == K::kLogSumExp) return (x > acc || std::isnan(x)) ? x : acc;
  if constexpr (kind == K::kMin) return (x < acc || std::isnan(x)) ? x : acc;
  return acc + x;  // sum, mean, log-sum
}

template <K kind>
inline __m256 step(__m256 acc, __m256 x) {
  if constexpr (kind == K::kSumSquare || kind == K::kL2) return _mm256_fmadd_ps(x, x, acc);
  if constexpr (kind == K::kL1) return _mm256_add_ps(acc, _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x));
  if constexpr (kind == K::kProd) return _mm256_mul_ps(acc, x);
  // max_ps(x, acc) returns acc when x is NaN; OR-ing the NaN mask keeps the NaN (all-ones
  // is a NaN, and max_ps/min_ps return their second operand when it is one).
  if constexpr (kind == K::kMax || kind == K::kLogSumExp)
    return _mm256_or_ps(_mm256_max_ps(x, acc), _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  if constexpr (kind == K::kMin) return _mm256_or_ps(_mm256_min_ps(x, acc), _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  return _mm256_add_ps(acc, x);
}

// Merges two partial results (sums of transformed values add; the rest reapply the step).
template <K kind>
inline float merge(float a, float b) {
  if constexpr (kind == K::kProd || kind == K::kMax || kind == K::kMin || kind == K::kLogSumExp)
    return step<kind>(a, b);
  return a + b;
}

template <K kind>
inline float horizontal(__m256 v) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, v);
  // Pairwise, so the sum's rounding matches a tree rather than a long chain.
  float a = merge<kind>(lanes[0], lanes[4]), b = merge<kind>(lanes[1], lanes[5]);
  float c = merge<kind>(lanes[2], lanes[6]), d = merge<kind>(lanes[3], lanes[7]);
  return merge<kind>(merge<kind>(a, c), merge<kind>(b, d));
}

// Lanes past n hold the identity, so partial vectors can be accumulated like full ones.
inline __m256 load_tail(const float* p, int64_t n, float fill) {
  __m256i m = vmath::tail_mask(n);
  return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}

template <K kind>
inline __m256 combine(__m256 a, __m256 b) {
  if constexpr (kind == K::kSumSquare || kind == K::kL2 || kind == K::kL1) return _mm256_add_ps(a, b);
  return step<kind>(a, b);
}

template <K kind>
float row_raw_avx2(const float* x, int64_t k) {
  const float id = identity(kind);
  __m256 a0 = _mm256_set1_ps(id), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    a0 = step<kind>(a0, _mm256_loadu_ps(x + i));
    a1 = step<kind>(a1, _mm256_loadu_ps(x + i + 8));
    a2 = step<kind>(a2, _mm256_loadu_ps(x + i + 16));
    a3 = step<kind>(a3, _mm256_loadu_ps(x + i + 24));
  }
  for (; i + 8 <= k; i += 8) a0 = step<kind>(a0, _mm256_loadu_ps(x + i));
  if (i < k) {
    // The identity of L1/L2/sum-square is 0, whose transform is 0 as well.
    a1 = step<kind>(a1, load_tail(x + i, k - i, id));
  }
  __m256 all = combine<kind>(combine<kind>(a0, a1), combine<kind>(a2, a3));
  return horizontal<kind>(all);
}

template <K kind>
float row_raw_scalar(const float* x, int64_t k) {
  float acc = identity(kind);
  for (int64_t i = 0; i < k; ++i) acc = step<kind>(acc, x[i]);
  return acc;
}

float finalize(K kind, float acc, int64_t k) {
  switch (kind) {
    case K::kMean: return acc / static_cast<float>(k);  // 0/0 is NaN for an empty set
    case K::kL2: return std::sqrt(acc);
    case K::kLogSum: return std::log(acc);
    default: return acc;
  }
}

float sum_exp_shifted_avx2(const float* x, int64_t k, float m) {
  __m256 vm = _mm256_set1_ps(m), a0 = _mm256_setzero_ps(), a1 = a0;
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    a0 = _mm256_add_ps(a0, vmath::exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm)));
    a1 = _mm256_add_ps(a1, vmath::exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vm)));
  }
  for (; i + 8 <= k; i += 8) a0 = _mm256_add_ps(a0, vmath::exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm)));
  if (i < k) {
    __m256 e = vmath::exp_avx2(_mm256_sub_ps(load_tail(x + i, k - i, -kInf), vm));
    a1 = _mm256_add_ps(a1, e);
  }
  return horizontal<K::kSum>(_mm256_add_ps(a0, a1));
}

template <bool kVector>
float log_sum_exp_row(const float* x, int64_t k) {
  float m = kVector ? row_raw_avx2<K::kMax>(x, k) : row_raw_scalar<K::kMax>(x, k);
  if (!std::isfinite(m)) return m;  // empty or all -inf: -inf; any +inf: +inf; NaN stays
  float s = 0;
  if (kVector) {
    s = sum_exp_shifted_avx2(x, k, m);
  } else {
    for (int64_t i = 0; i < k; ++i) s += std::exp(x[i] - m);
  }
  return m + std::log(s);
}

template <bool kVector>
float reduce_row(K kind, const float* x, int64_t k) {
#define MMINFER_ROW(KIND) \
  (kVector ? row_raw_avx2<KIND>(x, k) : row_raw_scalar<KIND>(x, k))
  switch (kind) {
    case K::kSum: return MMINFER_ROW(K::kSum);
    case K::kMean: return finalize(kind, MMINFER_ROW(K::kMean), k);
    case K::kMax: return MMINFER_ROW(K::kMax);
    case K::kMin: return MMINFER_ROW(K::kMin);
    case K::kProd: return MMINFER_ROW(K::kProd);
    case K::kL1: return MMINFER_ROW(K::kL1);
    case K::kL2: return finalize(kind, MMINFER_ROW(K::kL2), k);
    case K::kLogSum: return finalize(kind, MMINFER_ROW(K::kLogSum), k);
    case K::kSumSquare: return MMINFER_ROW(K::kSumSquare);
    case K::kLogSumExp: return log_sum_exp_row<kVector>(x, k);
  }
#undef MMINFER_ROW
  return 0;
}

// ---- columns ----

template <K kind>
void cols_raw_avx2(const float* x, int64_t k, int64_t n, int64_t stride, float* out) {
  const __m256 id = _mm256_set1_ps(identity(kind));
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    __m256 a0 = id, a1 = id, a2 = id, a3 = id;
    for (int64_t r = 0; r < k; ++r) {
      const float* p = x + r * stride + j;
      a0 = step<kind>(a0, _mm256_loadu_ps(p));
      a1 = step<kind>(a1, _mm256_loadu_ps(p + 8));
      a2 = step<kind>(a2, _mm256_loadu_ps(p + 16));
      a3 = step<kind>(a3, _mm256_loadu_ps(p + 24));
    }
    _mm256_storeu_ps(out + j, a0);
    _mm256_storeu_ps(out + j + 8, a1);
    _mm256_storeu_ps(out + j + 16, a2);
    _mm256_storeu_ps(out + j + 24, a3);
  }
  for (; j < n; j += 8) {
    int64_t w = n - j < 8 ? n - j : 8;
    __m256i m = vmath::tail_mask(w);
    __m256 a = id;
    for (int64_t r = 0; r < k; ++r) a = step<kind>(a, _mm256_maskload_ps(x + r * stride + j, m));
    _mm256_maskstore_ps(out + j, m, a);
  }
}

template <K kind>
void cols_raw_scalar(const float* x, int64_t k, int64_t n, int64_t stride, float* out) {
  for (int64_t j = 0; j < n; ++j) out[j] = identity(kind);
  for (int64_t r = 0; r < k; ++r)
    for (int64_t j = 0; j < n; ++j) out[j] = step<kind>(out[j], x[r * stride + j]);
}

template <bool kVector>
void cols_log_sum_exp(const float* x, int64_t k, int64_t n, int64_t stride, float* out) {
  if (kVector) {
    cols_raw_avx2<K::kMax>(x, k, n, stride, out);
  } else {
    cols_raw_scalar<K::kMax>(x, k, n, stride, out);
  }
  // Sums of exp(x - max), eight columns at a time so no scratch memory is needed.
  for (int64_t j = 0; j < n; j += 8) {
    int64_t w = n - j < 8 ? n - j : 8;
    float sums[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (kVector) {
      __m256i m = vmath::tail_mask(w);
      __m256 vm = _mm256_maskload_ps(out + j, m), s = _mm256_setzero_ps();
      for (int64_t r = 0; r < k; ++r)
        s = _mm256_add_ps(s, vmath::exp_avx2(_mm256_sub_ps(_mm256_maskload_ps(x + r * stride + j, m), vm)));
      _mm256_storeu_ps(sums, s);
    } else {
      for (int64_t r = 0; r < k; ++r)
        for (int64_t c = 0; c < w; ++c) sums[c] += std::exp(x[r * stride + j + c] - out[j + c]);
    }
    for (int64_t c = 0; c < w; ++c)
      if (std::isfinite(out[j + c])) out[j + c] += std::log(sums[c]);
  }
}

template <bool kVector>
void reduce_cols(K kind, const float* x, int64_t k, int64_t n, int64_t stride, float* out) {
#define MMINFER_COLS(KIND)                                 \
  do {                                                     \
    if (kVector) {                                         \
      cols_raw_avx2<KIND>(x, k, n, stride, out);           \
    } else {                                               \
      cols_raw_scalar<KIND>(x, k, n, stride, out);         \
    }                                                      \
  } while (0)
  switch (kind) {
    case K::kSum: MMINFER_COLS(K::kSum); break;
    case K::kMean: MMINFER_COLS(K::kMean); break;
    case K::kMax: MMINFER_COLS(K::kMax); break;
    case K::kMin: MMINFER_COLS(K::kMin); break;
    case K::kProd: MMINFER_COLS(K::kProd); break;
    case K::kL1: MMINFER_COLS(K::kL1); break;
    case K::kL2: MMINFER_COLS(K::kL2); break;
    case K::kLogSum: MMINFER_COLS(K::kLogSum); break;
    case K::kSumSquare: MMINFER_COLS(K::kSumSquare); break;
    case K::kLogSumExp: cols_log_sum_exp<kVector>(x, k, n, stride, out); return;
  }
#undef MMINFER_COLS
  if (kind == K::kMean || kind == K::kL2 || kind == K::kLogSum)
    for (int64_t j = 0; j < n; ++j) out[j] = finalize(kind, out[j], k);
}

}  // namespace

float reduce_row_avx2(ReduceKind kind, const float* x, int64_t k) { return reduce_row<true>(kind, x, k); }
float reduce_row_scalar(ReduceKind kind, const float* x, int64_t k) { return reduce_row<false>(kind, x, k); }

void reduce_cols_avx2(ReduceKind kind, const float* x, int64_t k, int64_t n, int64_t stride, float* out) {
  reduce_cols<true>(kind, x, k, n, stride, out);
}
void reduce_cols_scalar(ReduceKind kind, const float* x, int64_t k, int64_t n, int64_t stride, float* out) {
  reduce_cols<false>(kind, x, k, n, stride, out);
}

void mean_var_avx2(const float* x, int64_t n, float* mean, float* var) {
  float m = row_raw_avx2<K::kSum>(x, n) / static_cast<float>(n);
  __m256 vm = _mm256_set1_ps(m), a0 = _mm256_setzero_ps(), a1 = a0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), vm);
    __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vm);
    a0 = _mm256_fmadd_ps(d0, d0, a0);
    a1 = _mm256_fmadd_ps(d1, d1, a1);
  }
  for (; i + 8 <= n; i += 8) {
    __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vm);
    a0 = _mm256_fmadd_ps(d, d, a0);
  }
  if (i < n) {
    __m256 d = _mm256_sub_ps(load_tail(x + i, n - i, m), vm);  // padding lanes give 0
    a1 = _mm256_fmadd_ps(d, d, a1);
  }
  *mean = m;
  *var = horizontal<K::kSum>(_mm256_add_ps(a0, a1)) / static_cast<float>(n);
}

void mean_var_scalar(const float* x, int64_t n, float* mean, float* var) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  float m = s / static_cast<float>(n);
  float v = 0;
  for (int64_t i = 0; i < n; ++i) v += (x[i] - m) * (x[i] - m);
  *mean = m;
  *var = v / static_cast<float>(n);
}

void scale_shift_avx2(const float* x, float* y, int64_t n, float a, float b) {
  __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
  vmath::map_avx2(x, y, n, [&](__m256 v) { return _mm256_fmadd_ps(v, va, vb); });
}

void scale_shift_scalar(const float* x, float* y, int64_t n, float a, float b) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::fma(x[i], a, b);
}

}  // namespace mminfer::kernels::reduce_simd
