// The shared-key loops of cached_attention_loops.h, written once over an ISA's operations. Each
// ISA's file includes this with its Ops (f32_vector_avx2.h, f32_vector_avx512.h); everything here
// has internal linkage, so the copies built with different instruction sets never meet at link
// time.
//
// Ops provides: V (a float vector), kLanes (its lanes), zero(), load(p, left) (min(left, kLanes)
// floats, the rest zero: a plain load when all are there, since a masked load that misses the
// cache is ~3x slower on some CPUs, AMD Zen 4 among them), store(p, v, left), set1, fmadd,
// sum(v) and sum4(a, b, c, d) (the four vectors' sums as one __m128).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/nn/cached_attention_loops.h"

namespace mminfer::kernels::cached_attention {
namespace {

// Keys per block of the value loop: 64 rows of 64 columns (16 KiB) stay in L1 while every query
// row of the group sums them.
constexpr int64_t kValueBlock = 64;
// How far ahead of the key rows being read the next ones are requested.
constexpr int64_t kPrefetchBytes = 2048;

// Scores of four key rows for each query row. The first row brings the four keys (one 1 KiB
// stretch at head size 64) into L1; the others read them from there.
template <class Ops>
void scores4(const float* const* q, int rows, const float* k, int64_t stride, int64_t d, float* s, int64_t lds) {
  using V = typename Ops::V;
  for (int r = 0; r < rows; ++r) {
    V a0 = Ops::zero(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t c = 0; c < d; c += Ops::kLanes) {
      const V qv = Ops::load(q[r] + c, d - c);
      a0 = Ops::fmadd(qv, Ops::load(k + c, d - c), a0);
      a1 = Ops::fmadd(qv, Ops::load(k + stride + c, d - c), a1);
      a2 = Ops::fmadd(qv, Ops::load(k + 2 * stride + c, d - c), a2);
      a3 = Ops::fmadd(qv, Ops::load(k + 3 * stride + c, d - c), a3);
    }
    _mm_storeu_ps(s + r * lds, Ops::sum4(a0, a1, a2, a3));
  }
}

template <class Ops>
void scores1(const float* const* q, int rows, const float* k, int64_t d, float* s, int64_t lds) {
  for (int r = 0; r < rows; ++r) {
    typename Ops::V a = Ops::zero();
    for (int64_t c = 0; c < d; c += Ops::kLanes) a = Ops::fmadd(Ops::load(q[r] + c, d - c), Ops::load(k + c, d - c), a);
    s[r * lds] = Ops::sum(a);
  }
}

template <class Ops>
void group_scores(const float* const* q, int rows, const float* k, int64_t stride, int64_t n, int64_t d, float* s,
                  int64_t lds) {
  const int64_t row_bytes = stride * int64_t(sizeof(float));
  const int64_t ahead = std::max<int64_t>(1, kPrefetchBytes / (4 * row_bytes));  // in groups of four keys
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    if (j + 4 * (ahead + 1) <= n)
      for (int64_t b = 0; b < 4 * row_bytes; b += 64)
        _mm_prefetch(reinterpret_cast<const char*>(k + (j + 4 * ahead) * stride) + b, _MM_HINT_T0);
    scores4<Ops>(q, rows, k + j * stride, stride, d, s + j, lds);
  }
  for (; j < n; ++j) scores1<Ops>(q, rows, k + j * stride, d, s + j, lds);
}

// out[0, cols) += Σ_j w[j] * v_j[0, cols) for j < n, cols <= 4 * kLanes, summed in registers.
template <class Ops, int C>
void accumulate(const float* w, const float* v, int64_t stride, int64_t n, int64_t cols, float* out) {
  using V = typename Ops::V;
  constexpr int64_t W = Ops::kLanes;
  V a0 = Ops::load(out, cols), a1 = a0, a2 = a0, a3 = a0;
  if constexpr (C > 1) a1 = Ops::load(out + W, cols - W);
  if constexpr (C > 2) a2 = Ops::load(out + 2 * W, cols - 2 * W);
  if constexpr (C > 3) a3 = Ops::load(out + 3 * W, cols - 3 * W);
  for (int64_t j = 0; j < n; ++j) {
    const float* row = v + j * stride;
    const V wj = Ops::set1(w[j]);
    a0 = Ops::fmadd(wj, Ops::load(row, cols), a0);
    if constexpr (C > 1) a1 = Ops::fmadd(wj, Ops::load(row + W, cols - W), a1);
    if constexpr (C > 2) a2 = Ops::fmadd(wj, Ops::load(row + 2 * W, cols - 2 * W), a2);
    if constexpr (C > 3) a3 = Ops::fmadd(wj, Ops::load(row + 3 * W, cols - 3 * W), a3);
  }
  Ops::store(out, a0, cols);
  if constexpr (C > 1) Ops::store(out + W, a1, cols - W);
  if constexpr (C > 2) Ops::store(out + 2 * W, a2, cols - 2 * W);
  if constexpr (C > 3) Ops::store(out + 3 * W, a3, cols - 3 * W);
}

template <class Ops>
void group_values(const float* w, int64_t ldw, int rows, const float* v, int64_t stride, int64_t n, int64_t dv,
                  float* const* out) {
  constexpr int64_t kCols = 4 * Ops::kLanes;  // columns per pass: four vectors of sums per row
  for (int64_t j0 = 0; j0 < n; j0 += kValueBlock) {
    const int64_t m = std::min(kValueBlock, n - j0);
    // The next block, while this one is summed.
    if (j0 + kValueBlock < n) {
      const char* next = reinterpret_cast<const char*>(v + (j0 + kValueBlock) * stride);
      const int64_t bytes = std::min(kValueBlock, n - j0 - kValueBlock) * stride * int64_t(sizeof(float));
      for (int64_t b = 0; b < bytes; b += 64) _mm_prefetch(next + b, _MM_HINT_T0);
    }
    for (int r = 0; r < rows; ++r)
      for (int64_t c0 = 0; c0 < dv; c0 += kCols) {
        const int64_t cols = std::min(kCols, dv - c0);
        const float* wr = w + r * ldw + j0;
        const float* vb = v + j0 * stride + c0;
        switch ((cols + Ops::kLanes - 1) / Ops::kLanes) {
          case 1: accumulate<Ops, 1>(wr, vb, stride, m, cols, out[r] + c0); break;
          case 2: accumulate<Ops, 2>(wr, vb, stride, m, cols, out[r] + c0); break;
          case 3: accumulate<Ops, 3>(wr, vb, stride, m, cols, out[r] + c0); break;
          default: accumulate<Ops, 4>(wr, vb, stride, m, cols, out[r] + c0); break;
        }
      }
  }
}

}  // namespace
}  // namespace mminfer::kernels::cached_attention
