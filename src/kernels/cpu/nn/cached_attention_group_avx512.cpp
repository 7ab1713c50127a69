// AVX-512 loops for query rows that share their keys (cached_attention_group.h). Built with
// -mavx512f (CMakeLists.txt), called only when the CPU reports AVX-512F. Nothing here calls the
// AVX2 helpers of vector_math.h: their out-of-line copies would be built with this file's flags.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/nn/cached_attention_group.h"

namespace mminfer::kernels::cached_attention {

namespace {

inline __mmask16 lanes(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1u); }

// The sums of four vectors: [Σa, Σb, Σc, Σd].
inline __m128 sum4(__m512 a, __m512 b, __m512 c, __m512 d) {
  auto fold = [](__m512 v) {
    return _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  };
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(fold(a), fold(b)), _mm256_hadd_ps(fold(c), fold(d)));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// Up to 16 floats at p: a plain load when all 16 are there. A masked load that misses the cache
// is much slower than a plain one on some CPUs (AMD Zen 4: ~3x on streamed rows).
inline __m512 load16(const float* p, int64_t left) {
  return left >= 16 ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(lanes(left), p);
}

// Scores of four key rows for each query row. The first row brings the four keys (one 1 KiB
// stretch at head size 64) into L1; the others read them from there.
void scores4(const float* const* q, int rows, const float* k, int64_t stride, int64_t d, float* s, int64_t lds) {
  for (int r = 0; r < rows; ++r) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t c = 0; c < d; c += 16) {
      const __m512 qv = load16(q[r] + c, d - c);
      a0 = _mm512_fmadd_ps(qv, load16(k + c, d - c), a0);
      a1 = _mm512_fmadd_ps(qv, load16(k + stride + c, d - c), a1);
      a2 = _mm512_fmadd_ps(qv, load16(k + 2 * stride + c, d - c), a2);
      a3 = _mm512_fmadd_ps(qv, load16(k + 3 * stride + c, d - c), a3);
    }
    _mm_storeu_ps(s + r * lds, sum4(a0, a1, a2, a3));
  }
}

void scores1(const float* const* q, int rows, const float* k, int64_t d, float* s, int64_t lds) {
  for (int r = 0; r < rows; ++r) {
    __m512 a = _mm512_setzero_ps();
    for (int64_t c = 0; c < d; c += 16) a = _mm512_fmadd_ps(load16(q[r] + c, d - c), load16(k + c, d - c), a);
    s[r * lds] = _mm512_reduce_add_ps(a);
  }
}

// Keys per block of the value loop: 64 rows of 64 columns (16 KiB) stay in L1 while every
// query row sums them.
constexpr int64_t kValueBlock = 64;
// How far ahead of the rows being read the next ones are requested.
constexpr int64_t kPrefetchBytes = 2048;

// out[0, cols) += Σ_j w[j] * v_j[0, cols) for j < n, cols <= 64, summed in registers.
template <int C>
void accumulate(const float* w, const float* v, int64_t stride, int64_t n, int64_t cols, float* out) {
  __m512 a0 = load16(out, cols), a1 = a0, a2 = a0, a3 = a0;
  if constexpr (C > 1) a1 = load16(out + 16, cols - 16);
  if constexpr (C > 2) a2 = load16(out + 32, cols - 32);
  if constexpr (C > 3) a3 = load16(out + 48, cols - 48);
  for (int64_t j = 0; j < n; ++j) {
    const float* row = v + j * stride;
    const __m512 wj = _mm512_set1_ps(w[j]);
    a0 = _mm512_fmadd_ps(wj, load16(row, cols), a0);
    if constexpr (C > 1) a1 = _mm512_fmadd_ps(wj, load16(row + 16, cols - 16), a1);
    if constexpr (C > 2) a2 = _mm512_fmadd_ps(wj, load16(row + 32, cols - 32), a2);
    if constexpr (C > 3) a3 = _mm512_fmadd_ps(wj, load16(row + 48, cols - 48), a3);
  }
  auto store = [&](float* p, __m512 x, int64_t left) {
    if (left >= 16) _mm512_storeu_ps(p, x);
    else _mm512_mask_storeu_ps(p, lanes(left), x);
  };
  store(out, a0, cols);
  if constexpr (C > 1) store(out + 16, a1, cols - 16);
  if constexpr (C > 2) store(out + 32, a2, cols - 32);
  if constexpr (C > 3) store(out + 48, a3, cols - 48);
}

}  // namespace

void group_scores_avx512(const float* const* q, int rows, const float* k, int64_t stride, int64_t n, int64_t d, float* s,
                         int64_t lds) {
  int64_t j = 0;
  const int64_t ahead = std::max<int64_t>(1, kPrefetchBytes / (4 * stride * int64_t(sizeof(float))));
  for (; j + 4 <= n; j += 4) {
    if (j + 4 * (ahead + 1) <= n)
      for (int64_t b = 0; b < 4 * stride * int64_t(sizeof(float)); b += 64)
        _mm_prefetch(reinterpret_cast<const char*>(k + (j + 4 * ahead) * stride) + b, _MM_HINT_T0);
    scores4(q, rows, k + j * stride, stride, d, s + j, lds);
  }
  for (; j < n; ++j) scores1(q, rows, k + j * stride, d, s + j, lds);
}

void group_values_avx512(const float* w, int64_t ldw, int rows, const float* v, int64_t stride, int64_t n, int64_t dv,
                         float* const* out) {
  for (int r = 0; r < rows; ++r) std::fill_n(out[r], dv, 0.f);
  for (int64_t j0 = 0; j0 < n; j0 += kValueBlock) {
    const int64_t m = std::min(kValueBlock, n - j0);
    // The next block, while this one is summed.
    if (j0 + kValueBlock < n) {
      const char* next = reinterpret_cast<const char*>(v + (j0 + kValueBlock) * stride);
      const int64_t bytes = std::min(kValueBlock, n - j0 - kValueBlock) * stride * int64_t(sizeof(float));
      for (int64_t b = 0; b < bytes; b += 64) _mm_prefetch(next + b, _MM_HINT_T0);
    }
    for (int r = 0; r < rows; ++r)
      for (int64_t c0 = 0; c0 < dv; c0 += 64) {
        const int64_t cols = std::min<int64_t>(64, dv - c0);
        const float* wr = w + r * ldw + j0;
        const float* vb = v + j0 * stride + c0;
        switch ((cols + 15) / 16) {
          case 1: accumulate<1>(wr, vb, stride, m, cols, out[r] + c0); break;
          case 2: accumulate<2>(wr, vb, stride, m, cols, out[r] + c0); break;
          case 3: accumulate<3>(wr, vb, stride, m, cols, out[r] + c0); break;
          default: accumulate<4>(wr, vb, stride, m, cols, out[r] + c0); break;
        }
      }
  }
}

}  // namespace mminfer::kernels::cached_attention
