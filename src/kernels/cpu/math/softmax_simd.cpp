#include "kernels/cpu/math/softmax_simd.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/parallel.h"
#include "kernels/cpu/common/vector_math.h"
#include "kernels/cpu/math/reduce_simd.h"

namespace mminfer::kernels::softmax_simd {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The defined answers for a column whose maximum `m` is NaN or infinite (see the header).
void nonfinite_column(const float* x, float* y, int64_t k, int64_t stride, float m, bool log) {
  if (std::isnan(m)) {
    for (int64_t i = 0; i < k; ++i) y[i * stride] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  if (m < 0) {  // all -inf: a tie between all k entries
    float v = log ? -std::log(static_cast<float>(k)) : 1.0f / static_cast<float>(k);
    for (int64_t i = 0; i < k; ++i) y[i * stride] = v;
    return;
  }
  int64_t count = 0;
  for (int64_t i = 0; i < k; ++i) count += x[i * stride] == kInf;
  float hit = log ? -std::log(static_cast<float>(count)) : 1.0f / static_cast<float>(count);
  float miss = log ? -kInf : 0.0f;
  for (int64_t i = 0; i < k; ++i) y[i * stride] = x[i * stride] == kInf ? hit : miss;
}

void column_scalar(const float* x, float* y, int64_t k, int64_t stride, bool log) {
  float m = -kInf;
  for (int64_t i = 0; i < k; ++i) {
    float v = x[i * stride];
    if (v > m || std::isnan(v)) m = v;
    if (std::isnan(m)) break;
  }
  if (!std::isfinite(m)) {
    nonfinite_column(x, y, k, stride, m, log);
    return;
  }
  float s = 0;
  if (log) {
    for (int64_t i = 0; i < k; ++i) s += std::exp(x[i * stride] - m);
    float ls = std::log(s);
    for (int64_t i = 0; i < k; ++i) y[i * stride] = (x[i * stride] - m) - ls;
    return;
  }
  for (int64_t i = 0; i < k; ++i) {
    float e = std::exp(x[i * stride] - m);
    y[i * stride] = e;
    s += e;
  }
  float inv = 1.0f / s;
  for (int64_t i = 0; i < k; ++i) y[i * stride] *= inv;
}

inline __m256 max_nan(__m256 acc, __m256 v) {
  return _mm256_or_ps(_mm256_max_ps(v, acc), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}

}  // namespace

void row_scalar(const float* x, float* y, int64_t n, bool log) { column_scalar(x, y, n, 1, log); }

void row_avx2(const float* x, float* y, int64_t n, bool log) {
  if (n <= 0) return;
  float m = reduce_simd::reduce_row_avx2(reduce_simd::ReduceKind::kMax, x, n);
  if (!std::isfinite(m)) {
    nonfinite_column(x, y, n, 1, m, log);
    return;
  }
  const __m256 vm = _mm256_set1_ps(m);
  __m256 s0 = _mm256_setzero_ps(), s1 = s0;
  int64_t i = 0;
  int64_t tail = n % 8;
  __m256i tm = vmath::tail_mask(tail);
  if (log) {
    for (; i + 16 <= n; i += 16) {
      s0 = _mm256_add_ps(s0, vmath::exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm)));
      s1 = _mm256_add_ps(s1, vmath::exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vm)));
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_add_ps(s0, vmath::exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm)));
    if (tail) {
      __m256 e = vmath::exp_avx2(_mm256_sub_ps(_mm256_maskload_ps(x + i, tm), vm));
      s1 = _mm256_add_ps(s1, _mm256_and_ps(e, _mm256_castsi256_ps(tm)));
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, _mm256_add_ps(s0, s1));
    float s = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
    const __m256 ls = _mm256_set1_ps(std::log(s));
    vmath::map_avx2(x, y, n, [&](__m256 v) { return _mm256_sub_ps(_mm256_sub_ps(v, vm), ls); });
    return;
  }
  for (; i + 16 <= n; i += 16) {
    __m256 e0 = vmath::exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    __m256 e1 = vmath::exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vm));
    _mm256_storeu_ps(y + i, e0);
    _mm256_storeu_ps(y + i + 8, e1);
    s0 = _mm256_add_ps(s0, e0);
    s1 = _mm256_add_ps(s1, e1);
  }
  for (; i + 8 <= n; i += 8) {
    __m256 e = vmath::exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(y + i, e);
    s0 = _mm256_add_ps(s0, e);
  }
  if (tail) {
    __m256 e = _mm256_and_ps(vmath::exp_avx2(_mm256_sub_ps(_mm256_maskload_ps(x + i, tm), vm)), _mm256_castsi256_ps(tm));
    _mm256_maskstore_ps(y + i, tm, e);
    s1 = _mm256_add_ps(s1, e);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(s0, s1));
  float s = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
  const __m256 inv = _mm256_set1_ps(1.0f / s);
  vmath::map_avx2(y, y, n, [&](__m256 v) { return _mm256_mul_ps(v, inv); });
}

void cols_scalar(const float* x, float* y, int64_t k, int64_t n, int64_t stride, bool log) {
  for (int64_t j = 0; j < n; ++j) column_scalar(x + j, y + j, k, stride, log);
}

void cols_avx2(const float* x, float* y, int64_t k, int64_t n, int64_t stride, bool log) {
  if (k <= 0) return;
  for (int64_t j = 0; j < n; j += 8) {
    int64_t w = std::min<int64_t>(8, n - j);
    __m256i mask = vmath::tail_mask(w);
    const float* xs = x + j;
    float* ys = y + j;
    __m256 vm = _mm256_set1_ps(-kInf);
    for (int64_t r = 0; r < k; ++r) vm = max_nan(vm, _mm256_maskload_ps(xs + r * stride, mask));
    alignas(32) float m[8];
    _mm256_store_ps(m, vm);
    bool finite = true;
    for (int64_t c = 0; c < w; ++c) finite = finite && std::isfinite(m[c]);
    if (!finite) {  // rare: let the scalar path give the defined answers for this block
      cols_scalar(xs, ys, k, w, stride, log);
      continue;
    }
    __m256 s = _mm256_setzero_ps();
    if (log) {
      for (int64_t r = 0; r < k; ++r)
        s = _mm256_add_ps(s, vmath::exp_avx2(_mm256_sub_ps(_mm256_maskload_ps(xs + r * stride, mask), vm)));
      alignas(32) float ls[8];
      _mm256_store_ps(ls, s);
      for (int c = 0; c < 8; ++c) ls[c] = c < w ? std::log(ls[c]) : 0.0f;
      __m256 vls = _mm256_load_ps(ls);
      for (int64_t r = 0; r < k; ++r) {
        __m256 v = _mm256_maskload_ps(xs + r * stride, mask);
        _mm256_maskstore_ps(ys + r * stride, mask, _mm256_sub_ps(_mm256_sub_ps(v, vm), vls));
      }
      continue;
    }
    for (int64_t r = 0; r < k; ++r) {
      __m256 e = vmath::exp_avx2(_mm256_sub_ps(_mm256_maskload_ps(xs + r * stride, mask), vm));
      _mm256_maskstore_ps(ys + r * stride, mask, e);
      s = _mm256_add_ps(s, e);
    }
    __m256 inv = _mm256_div_ps(_mm256_set1_ps(1.0f), s);
    for (int64_t r = 0; r < k; ++r)
      _mm256_maskstore_ps(ys + r * stride, mask, _mm256_mul_ps(_mm256_maskload_ps(ys + r * stride, mask), inv));
  }
}

void softmax_f32(const float* x, float* y, int64_t outer, int64_t k, int64_t inner, bool log) {
  if (outer <= 0 || k <= 0 || inner <= 0) return;
  if (inner == 1) {
    int64_t grain = std::max<int64_t>(1, 8192 / k);
    parallel_for(outer, grain, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) row_avx2(x + o * k, y + o * k, k, log);
    });
    return;
  }
  constexpr int64_t kBlock = 64;
  int64_t blocks = (inner + kBlock - 1) / kBlock;
  int64_t grain = std::max<int64_t>(1, 8192 / (k * std::min(inner, kBlock)));
  parallel_for(outer * blocks, grain, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      int64_t o = t / blocks, j0 = (t % blocks) * kBlock, w = std::min(kBlock, inner - j0);
      int64_t off = o * k * inner + j0;
      cols_avx2(x + off, y + off, k, w, inner, log);
    }
  });
}

}  // namespace mminfer::kernels::softmax_simd
