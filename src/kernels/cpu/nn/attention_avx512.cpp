// The attention tiles with 512-bit registers: 6 query rows x 32 keys per step, twice the keys of
// the AVX2 tiles for the same instruction count. Built with -mavx512f (CMakeLists.txt) and
// called only when the CPU reports AVX-512F; the softmax between the tiles is shared.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/common/vector_math_avx512.h"
#include "kernels/cpu/nn/attention.h"

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

__mmask16 lanes(int64_t n) { return static_cast<__mmask16>(n >= 16 ? 0xFFFF : n <= 0 ? 0 : (1u << n) - 1); }

template <int R>
void scores_tile(const Problem& p, int64_t i0, int64_t keys, float* s) {
  for (int64_t j = 0; j < keys; j += 32) {
    Pair512 io(keys - j);
    __m512 a[R], b[R];
    for (int r = 0; r < R; ++r) a[r] = b[r] = _mm512_setzero_ps();
    const float* q = p.q + i0 * p.q_stride;
    for (int64_t c = 0; c < p.d; ++c) {
      const float* kr = p.kt + c * p.kt_stride + j;
      vmath::rank1_update2<R>(q + c, p.q_stride, io.lo(kr), io.hi(kr), a, b);
    }
    for (int r = 0; r < R; ++r) io.store(s + r * p.sk + j, a[r], b[r]);
  }
}

// Sixteen vectors -> one: lane k holds the sum of v[k]'s lanes. Halves the vectors four times
// (256-bit halves, 128-bit blocks, pairs, neighbours), then one permute puts the sums in order.
__attribute__((always_inline)) inline __m512 sum_lanes16(__m512 (&v)[16]) {
  __m512 w[8], x[4], y[2];
  for (int i = 0; i < 8; ++i)
    w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[i], v[i + 8], 0x44), _mm512_shuffle_f32x4(v[i], v[i + 8], 0xEE));
  for (int i = 0; i < 4; ++i)  // blocks: v_i, v_i+8 | v_i+4, v_i+12 (four partial sums each)
    x[i] = _mm512_add_ps(_mm512_shuffle_f32x4(w[i], w[i + 4], 0x88), _mm512_shuffle_f32x4(w[i], w[i + 4], 0xDD));
  for (int i = 0; i < 2; ++i)  // per block: two partials of x_i's vector, two of x_i+2's
    y[i] = _mm512_add_ps(_mm512_shuffle_ps(x[i], x[i + 2], 0x88), _mm512_shuffle_ps(x[i], x[i + 2], 0xDD));
  __m512 z = _mm512_add_ps(_mm512_shuffle_ps(y[0], y[1], 0x88), _mm512_shuffle_ps(y[0], y[1], 0xDD));
  // z's blocks: [v0 v2 v1 v3] [v8 v10 v9 v11] [v4 v6 v5 v7] [v12 v14 v13 v15]
  const __m512i order = _mm512_setr_epi32(0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15);
  return _mm512_permutexvar_ps(order, z);
}

// The scores when K is kept as rows (Problem::k_rows): each is a dot product over the depth, 16
// keys at a time, so a cache is read once and in place. For the few query rows of decoding. The
// depth goes in panels of 64 (four vectors of the query row in registers).
//
// Whole blocks of 16 keys at a depth that is a multiple of 64 (heads of 64 and 128) take plain
// loads with one pointer stepping over the keys: with masks and per-key pointers GCC ran out of
// mask and general registers and kept them on the stack, at twice the time. Other blocks mask
// past the depth and repeat the last key past the last one (its sums are not stored).
template <int R, bool kWhole>
__attribute__((always_inline)) inline void scores_rows_block(const Problem& p, int64_t i0, int64_t j, int n, float* s) {
  const float* base = p.kt + j * p.kt_stride;
  for (int r = 0; r < R; ++r) {
    const float* q = p.q + (i0 + r) * p.q_stride;
    __m512 acc[16];
    _Pragma("GCC unroll 16") for (int k = 0; k < 16; ++k) acc[k] = _mm512_setzero_ps();
    for (int64_t c = 0; c < p.d; c += 64) {
      const __mmask16 m0 = kWhole ? 0xFFFF : lanes(p.d - c), m1 = kWhole ? 0xFFFF : lanes(p.d - c - 16);
      const __mmask16 m2 = kWhole ? 0xFFFF : lanes(p.d - c - 32), m3 = kWhole ? 0xFFFF : lanes(p.d - c - 48);
      const auto load = [&](__mmask16 m, const float* x) { return kWhole ? _mm512_loadu_ps(x) : _mm512_maskz_loadu_ps(m, x); };
      const __m512 q0 = load(m0, q + c), q1 = load(m1, q + c + 16), q2 = load(m2, q + c + 32), q3 = load(m3, q + c + 48);
      const float* kr = base + c;
      _Pragma("GCC unroll 16") for (int k = 0; k < 16; ++k) {
        __m512 a = _mm512_fmadd_ps(q0, load(m0, kr), acc[k]);
        __m512 b = _mm512_mul_ps(q1, load(m1, kr + 16));
        a = _mm512_fmadd_ps(q2, load(m2, kr + 32), a);
        b = _mm512_fmadd_ps(q3, load(m3, kr + 48), b);
        acc[k] = _mm512_add_ps(a, b);
        if (kWhole || k + 1 < n) kr += p.kt_stride;
      }
    }
    _mm512_mask_storeu_ps(s + r * p.sk + j, lanes(n), sum_lanes16(acc));
  }
}

template <int R>
void scores_rows_tile(const Problem& p, int64_t i0, int64_t keys, float* s) {
  const bool whole_depth = p.d % 64 == 0;
  for (int64_t j = 0; j < keys; j += 16) {
    const int n = static_cast<int>(std::min<int64_t>(16, keys - j));
    if (whole_depth && n == 16) scores_rows_block<R, true>(p, i0, j, n, s);
    else scores_rows_block<R, false>(p, i0, j, n, s);
  }
}

// values_tile for decoding's few rows (Problem::k_rows): V's rows are read once, in order, for
// up to 64 output columns (four vectors per query row in registers), instead of once per 32
// columns with one chain of sums per vector; with one row, two keys at a time keep eight sums in
// flight. At 1,500 keys from DRAM this halves the time of the pass over V. Whole panels of 64
// columns take plain loads (masks cost registers GCC then keeps on the stack).
template <int R, bool kWhole>
__attribute__((always_inline)) inline void values_rows_panel(const Problem& p, int64_t i0, int64_t keys, const float* s, int64_t c) {
  const __mmask16 m0 = kWhole ? 0xFFFF : lanes(p.dv - c), m1 = kWhole ? 0xFFFF : lanes(p.dv - c - 16);
  const __mmask16 m2 = kWhole ? 0xFFFF : lanes(p.dv - c - 32), m3 = kWhole ? 0xFFFF : lanes(p.dv - c - 48);
  const auto load = [&](__mmask16 m, const float* x) { return kWhole ? _mm512_loadu_ps(x) : _mm512_maskz_loadu_ps(m, x); };
  __m512 a0[R], a1[R], a2[R], a3[R];
  _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) a0[r] = a1[r] = a2[r] = a3[r] = _mm512_setzero_ps();
  int64_t j = 0;
  const float* v = p.v + c;
  if constexpr (R == 1) {
    __m512 b0 = _mm512_setzero_ps(), b1 = b0, b2 = b0, b3 = b0;
    for (; j + 2 <= keys; j += 2, v += 2 * p.v_stride) {
      const float* w = v + p.v_stride;
      const __m512 pv = _mm512_set1_ps(s[j]), pw = _mm512_set1_ps(s[j + 1]);
      a0[0] = _mm512_fmadd_ps(pv, load(m0, v), a0[0]);
      a1[0] = _mm512_fmadd_ps(pv, load(m1, v + 16), a1[0]);
      a2[0] = _mm512_fmadd_ps(pv, load(m2, v + 32), a2[0]);
      a3[0] = _mm512_fmadd_ps(pv, load(m3, v + 48), a3[0]);
      b0 = _mm512_fmadd_ps(pw, load(m0, w), b0);
      b1 = _mm512_fmadd_ps(pw, load(m1, w + 16), b1);
      b2 = _mm512_fmadd_ps(pw, load(m2, w + 32), b2);
      b3 = _mm512_fmadd_ps(pw, load(m3, w + 48), b3);
    }
    a0[0] = _mm512_add_ps(a0[0], b0), a1[0] = _mm512_add_ps(a1[0], b1);
    a2[0] = _mm512_add_ps(a2[0], b2), a3[0] = _mm512_add_ps(a3[0], b3);
  }
  for (; j < keys; ++j, v += p.v_stride) {
    vmath::rank1_update4<R>(s + j, p.sk, load(m0, v), load(m1, v + 16), load(m2, v + 32), load(m3, v + 48), a0, a1, a2, a3);
  }
  _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) {
    float* o = p.out + (i0 + r) * p.out_stride + c;
    _mm512_mask_storeu_ps(o, m0, a0[r]);
    _mm512_mask_storeu_ps(o + 16, m1, a1[r]);
    _mm512_mask_storeu_ps(o + 32, m2, a2[r]);
    _mm512_mask_storeu_ps(o + 48, m3, a3[r]);
  }
}

template <int R>
void values_rows_tile(const Problem& p, int64_t i0, int64_t keys, const float* s) {
  for (int64_t c = 0; c < p.dv; c += 64) {
    if (p.dv - c >= 64) values_rows_panel<R, true>(p, i0, keys, s, c);
    else values_rows_panel<R, false>(p, i0, keys, s, c);
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
      vmath::rank1_update2<R>(s + j, p.sk, io.lo(vr), io.hi(vr), a, b);
    }
    for (int r = 0; r < R; ++r) io.store(p.out + (i0 + r) * p.out_stride + c, a[r], b[r]);
  }
}


// One row of raw scores -> probabilities with 512-bit masked loads and stores (AVX2's masked
// moves are slow on some CPUs, and every row of 50 keys ends in one). Rows with a NaN or with
// no finite logit take the shared softmax_rows, which defines those cases.
void softmax_row(const Problem& p, int64_t i, float* s) {
  const int64_t visible = visible_keys(p, i);
  const float* mask = mask_row(p, i);
  const __m512 scale = _mm512_set1_ps(p.scale);
  auto logits = [&](int64_t j, __mmask16 m) {
    __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, s + j), scale);
    return mask ? _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, mask + j)) : x;
  };
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  __mmask16 nan = 0;
  for (int64_t j = 0; j < visible; j += 16) {
    __mmask16 m = lanes(visible - j);
    __m512 x = logits(j, m);
    nan |= _mm512_mask_cmp_ps_mask(m, x, x, _CMP_UNORD_Q);
    vmax = _mm512_mask_max_ps(vmax, m, vmax, x);
  }
  float mx = _mm512_reduce_max_ps(vmax);
  if (nan || !(mx > -INFINITY && mx < INFINITY)) {
    softmax_rows(p, i, 1, s);
    return;
  }
  const __m512 vm = _mm512_set1_ps(mx);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < p.sk; j += 16) {
    __mmask16 all = lanes(p.sk - j), m = lanes(visible - j);
    __m512 e = _mm512_maskz_mov_ps(m, vmath::exp_avx512(_mm512_sub_ps(logits(j, m), vm)));
    sum = _mm512_add_ps(sum, e);
    _mm512_mask_storeu_ps(s + j, all, e);  // hidden keys get 0
  }
  const __m512 inv = _mm512_set1_ps(1.f / _mm512_reduce_add_ps(sum));
  for (int64_t j = 0; j < visible; j += 16) {
    __mmask16 m = lanes(visible - j);
    _mm512_mask_storeu_ps(s + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, s + j), inv));
  }
}

template <int R>
void block(const Problem& p, int64_t i0, float* s) {
  BlockKeys k = block_keys(p, i0, R);
  if (p.k_rows) scores_rows_tile<R>(p, i0, k.seen, s);
  else scores_tile<R>(p, i0, k.seen, s);
  for (int r = 0; r < R; ++r) softmax_row(p, i0 + r, s + r * p.sk);
  if (p.k_rows) values_rows_tile<R>(p, i0, k.used, s);
  else values_tile<R>(p, i0, k.used, s);
}

}  // namespace

void run_avx512(const Problem& p, float* scratch) {
  for_each_block(p.sq, [&]<int R>(int64_t i0) { block<R>(p, i0, scratch); });
}

}  // namespace mminfer::kernels::attention
