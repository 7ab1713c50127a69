// The attention tiles with 512-bit registers: 6 query rows x 32 keys per step, twice the keys of
// the AVX2 tiles for the same instruction count. Built with -mavx512f (CMakeLists.txt) and
// called only when the CPU reports AVX-512F; the softmax between the tiles is shared.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/attention.h"

namespace mminfer::kernels::attention {

namespace {

// Two 16-lane vectors of which the first `w` lanes are real; the rest load as 0 and never store.
struct Pair512 {
  __mmask16 m0, m1;
  explicit Pair512(int64_t w)
      : m0(static_cast<__mmask16>(w >= 16 ? 0xFFFF : (1u << std::max<int64_t>(w, 0)) - 1)),
        m1(static_cast<__mmask16>(w >= 32 ? 0xFFFF : w <= 16 ? 0 : (1u << (w - 16)) - 1)) {}
  __m512 lo(const float* p) const { return _mm512_maskz_loadu_ps(m0, p); }
  __m512 hi(const float* p) const { return _mm512_maskz_loadu_ps(m1, p + 16); }
  void store(float* p, __m512 a, __m512 b) const {
    _mm512_mask_storeu_ps(p, m0, a);
    _mm512_mask_storeu_ps(p + 16, m1, b);
  }
};

template <int R>
void scores_tile(const Problem& p, int64_t i0, int64_t keys, float* s) {
  for (int64_t j = 0; j < keys; j += 32) {
    Pair512 io(keys - j);
    __m512 a[R], b[R];
    for (int r = 0; r < R; ++r) a[r] = b[r] = _mm512_setzero_ps();
    const float* q = p.q + i0 * p.q_stride;
    for (int64_t c = 0; c < p.d; ++c) {
      const float* kr = p.kt + c * p.kt_stride + j;
      __m512 k0 = io.lo(kr), k1 = io.hi(kr);
      for (int r = 0; r < R; ++r) {
        __m512 qv = _mm512_set1_ps(q[r * p.q_stride + c]);
        a[r] = _mm512_fmadd_ps(qv, k0, a[r]);
        b[r] = _mm512_fmadd_ps(qv, k1, b[r]);
      }
    }
    for (int r = 0; r < R; ++r) io.store(s + r * p.sk + j, a[r], b[r]);
  }
}

template <int R>
void values_tile(const Problem& p, int64_t i0, int64_t keys, const float* s) {
  for (int64_t c = 0; c < p.dv; c += 32) {
    Pair512 io(p.dv - c);
    __m512 a[R], b[R];
    for (int r = 0; r < R; ++r) a[r] = b[r] = _mm512_setzero_ps();
    for (int64_t j = 0; j < keys; ++j) {
      const float* vr = p.v + j * p.v_stride + c;
      __m512 v0 = io.lo(vr), v1 = io.hi(vr);
      for (int r = 0; r < R; ++r) {
        __m512 pv = _mm512_set1_ps(s[r * p.sk + j]);
        a[r] = _mm512_fmadd_ps(pv, v0, a[r]);
        b[r] = _mm512_fmadd_ps(pv, v1, b[r]);
      }
    }
    for (int r = 0; r < R; ++r) io.store(p.out + (i0 + r) * p.out_stride + c, a[r], b[r]);
  }
}

template <int R>
void block(const Problem& p, int64_t i0, float* s) {
  BlockKeys k = block_keys(p, i0, R);
  scores_tile<R>(p, i0, k.seen, s);
  softmax_rows(p, i0, R, s);
  values_tile<R>(p, i0, k.used, s);
}

}  // namespace

void run_avx512(const Problem& p, float* scratch) {
  for_each_block(p.sq, [&]<int R>(int64_t i0) { block<R>(p, i0, scratch); });
}

bool has_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}

}  // namespace mminfer::kernels::attention
