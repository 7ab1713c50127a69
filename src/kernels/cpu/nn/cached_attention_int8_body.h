// The INT8-cache loops of cached attention (cached_attention_loops.h), written once over an ISA's
// operations. Each ISA's file includes this with its Ops (f32_vector_avx2.h, f32_vector_avx512.h);
// everything here has internal linkage, so the copies built with different instruction sets never
// meet at link time.
//
// Ops provides: V (a float vector), kLanes (its lanes), zero, load(p), store(p, v), set1, fmadd,
// load(const int8_t*) (kLanes int8 codes as floats), sum(v) and sum4(a, b, c, d) (the four vectors' sums as
// one __m128), both folding to 8 lanes first so that the twins sum in the same order.
#include <immintrin.h>

#include <cstdint>

#include "core/int8_rows.h"
#include "kernels/cpu/nn/cached_attention_loops.h"

namespace mminfer::kernels::cached_attention {
namespace {

inline float tail_dot(const float* q, const int8_t* codes, int64_t from, int64_t d) {
  float acc = 0.f;
  for (int64_t c = from; c < d; ++c) acc += q[c] * static_cast<float>(codes[c]);
  return acc;
}

template <class Ops>
void int8_scores(const float* q, const int8_t* k, int64_t stride, int64_t n, int64_t d, float* s) {
  using V = typename Ops::V;
  const int64_t body = d & ~int64_t{Ops::kLanes - 1};
  int64_t j = 0;
  // Four rows per pass over q, one horizontal reduction for the four.
  for (; j + 4 <= n; j += 4) {
    const int8_t* r = k + j * stride;
    V a0 = Ops::zero(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t c = 0; c < body; c += Ops::kLanes) {
      V qv = Ops::load(q + c);
      a0 = Ops::fmadd(qv, Ops::load(r + c), a0);
      a1 = Ops::fmadd(qv, Ops::load(r + stride + c), a1);
      a2 = Ops::fmadd(qv, Ops::load(r + 2 * stride + c), a2);
      a3 = Ops::fmadd(qv, Ops::load(r + 3 * stride + c), a3);
    }
    alignas(16) float four[4];
    _mm_store_ps(four, Ops::sum4(a0, a1, a2, a3));
    for (int i = 0; i < 4; ++i) {
      const int8_t* row = r + i * stride;
      s[j + i] = (four[i] + tail_dot(q, row, body, d)) * int8_rows::scale_of(row, d);
    }
  }
  for (; j < n; ++j) {
    const int8_t* row = k + j * stride;
    V a = Ops::zero();
    for (int64_t c = 0; c < body; c += Ops::kLanes) a = Ops::fmadd(Ops::load(q + c), Ops::load(row + c), a);
    s[j] = (Ops::sum(a) + tail_dot(q, row, body, d)) * int8_rows::scale_of(row, d);
  }
}

template <class Ops>
void int8_accumulate(const float* w, const int8_t* v, int64_t stride, int64_t n, int64_t dv, float* out) {
  using V = typename Ops::V;
  const int64_t body = dv & ~int64_t{Ops::kLanes - 1};
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const int8_t* r = v + j * stride;
    float ws[4];
    for (int i = 0; i < 4; ++i) ws[i] = w[j + i] * int8_rows::scale_of(r + i * stride, dv);
    const V w0 = Ops::set1(ws[0]), w1 = Ops::set1(ws[1]), w2 = Ops::set1(ws[2]), w3 = Ops::set1(ws[3]);
    for (int64_t c = 0; c < body; c += Ops::kLanes) {
      V o = Ops::load(out + c);
      o = Ops::fmadd(w0, Ops::load(r + c), o);
      o = Ops::fmadd(w1, Ops::load(r + stride + c), o);
      o = Ops::fmadd(w2, Ops::load(r + 2 * stride + c), o);
      o = Ops::fmadd(w3, Ops::load(r + 3 * stride + c), o);
      Ops::store(out + c, o);
    }
    for (int64_t c = body; c < dv; ++c)
      for (int i = 0; i < 4; ++i) out[c] += ws[i] * static_cast<float>(r[i * stride + c]);
  }
  for (; j < n; ++j) {
    const int8_t* row = v + j * stride;
    const float wj = w[j] * int8_rows::scale_of(row, dv);
    const V wv = Ops::set1(wj);
    for (int64_t c = 0; c < body; c += Ops::kLanes) Ops::store(out + c, Ops::fmadd(wv, Ops::load(row + c), Ops::load(out + c)));
    for (int64_t c = body; c < dv; ++c) out[c] += wj * static_cast<float>(row[c]);
  }
}

}  // namespace
}  // namespace mminfer::kernels::cached_attention
