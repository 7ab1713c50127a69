// Long unmasked attention (encoders: Whisper's 1,500 frames) with 512-bit registers, blocked
// over the keys: a block of 64 keys (its Kᵀ and V slices, 32 KB at depth 64) stays in L1 while
// two query tiles use it, each tile's 6 x 64 scores never leave L1, and a running maximum and
// sum per row (online softmax) let the probabilities be normalised once, at the end. Built with
// -mavx512f (CMakeLists.txt); called only when the CPU reports AVX-512F.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/common/vector_math_avx512.h"
#include "kernels/cpu/nn/attention.h"

namespace mminfer::kernels::attention {

namespace {

constexpr int kKeys = 64;           // keys per block: four vectors
constexpr int kTilesPerBlock = 4;   // query tiles of kBlockRows that share a key block while it is in L1
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

__mmask16 lanes(int64_t n) { return static_cast<__mmask16>(n >= 16 ? 0xFFFF : n <= 0 ? 0 : (1u << n) - 1); }

// Running softmax state of one tile's rows: maximum logit, sum of exp(logit - maximum), and the
// unnormalised output rows (dv floats each).
struct TileState {
  float* m;
  float* l;
  float* o;
};

// Eight vectors -> one: lane r (r < 8) is op over v[r]'s lanes. Halves the vectors three times
// (256-bit halves, 128-bit blocks, pairs), folds neighbours, then one permute orders the lanes.
template <typename Op>
__m512 reduce8(const __m512 (&v)[8], Op op) {
  __m512 w[4], x[2];
  for (int i = 0; i < 4; ++i)  // blocks: v_i, v_i | v_i+4, v_i+4
    w[i] = op(_mm512_shuffle_f32x4(v[i], v[i + 4], 0x44), _mm512_shuffle_f32x4(v[i], v[i + 4], 0xEE));
  for (int i = 0; i < 2; ++i)  // blocks: v_i | v_i+4 | v_i+2 | v_i+6
    x[i] = op(_mm512_shuffle_f32x4(w[i], w[i + 2], 0x88), _mm512_shuffle_f32x4(w[i], w[i + 2], 0xDD));
  __m512 y = op(_mm512_shuffle_ps(x[0], x[1], 0x88), _mm512_shuffle_ps(x[0], x[1], 0xDD));
  y = op(y, _mm512_permute_ps(y, 0xB1));  // blocks: [v0 v0 v1 v1] [v4 v4 v5 v5] [v2 v2 v3 v3] [v6 v6 v7 v7]
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 2, 8, 10, 4, 6, 12, 14, 0, 0, 0, 0, 0, 0, 0, 0), y);
}

// Rows [i0, i0 + R) against keys [j0, j0 + kb): scores in 24 registers, then the online softmax
// update, then o += P·V over the block. `pb` holds R x kKeys probabilities.
// Raw scores of rows [i0, i0 + R) against keys [j0, j0 + 64) (lanes past the block read 0),
// kept in 24 registers over the depth and stored to `pb` (R x kKeys). The loops are unrolled by
// pragma: otherwise GCC keeps the accumulators on the stack, at half the speed.
template <int R, bool Full>
void scores_block(const Problem& p, int64_t i0, int64_t j0, const __mmask16 (&km)[4], float* pb) {
  // Four named vectors per row, not an array: GCC keeps a 2-D array of accumulators on the stack.
  __m512 s0[R], s1[R], s2[R], s3[R];
  _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) s0[r] = s1[r] = s2[r] = s3[r] = _mm512_setzero_ps();
  const float* q = p.q + i0 * p.q_stride;
  for (int64_t c = 0; c < p.d; ++c) {
    const float* kr = p.kt + c * p.kt_stride + j0;
    const __m512 k0 = Full ? _mm512_loadu_ps(kr) : _mm512_maskz_loadu_ps(km[0], kr);
    const __m512 k1 = Full ? _mm512_loadu_ps(kr + 16) : _mm512_maskz_loadu_ps(km[1], kr + 16);
    const __m512 k2 = Full ? _mm512_loadu_ps(kr + 32) : _mm512_maskz_loadu_ps(km[2], kr + 32);
    const __m512 k3 = Full ? _mm512_loadu_ps(kr + 48) : _mm512_maskz_loadu_ps(km[3], kr + 48);
    vmath::rank1_update4<R>(q + c, p.q_stride, k0, k1, k2, k3, s0, s1, s2, s3);
  }
  _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) {
    float* row = pb + r * kKeys;
    _mm512_storeu_ps(row, s0[r]), _mm512_storeu_ps(row + 16, s1[r]);
    _mm512_storeu_ps(row + 32, s2[r]), _mm512_storeu_ps(row + 48, s3[r]);
  }
}

// Rows [i0, i0 + R) against keys [j0, j0 + kb): scores, the online softmax update, then
// o += P·V over the block. `pb` holds R x kKeys scores, then probabilities.
template <int R>
void tile_block(const Problem& p, int64_t i0, int64_t j0, int kb, TileState st, float* pb) {
  const __mmask16 km[4] = {lanes(kb), lanes(kb - 16), lanes(kb - 32), lanes(kb - 48)};
  if (kb == kKeys) scores_block<R, true>(p, i0, j0, km, pb);
  else scores_block<R, false>(p, i0, j0, km, pb);
  __m512 s[R][4];
  _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r)
    for (int x = 0; x < 4; ++x) s[r][x] = _mm512_loadu_ps(pb + r * kKeys + 16 * x);
  // The online softmax, the tile's rows side by side in the lanes of one vector: block maximum,
  // new running maximum, the factor alpha that rescales what each row gathered so far, then the
  // probabilities and their sums. No branches: NaN or infinite scores poison l, and the final
  // check sends those rows to the exact path.
  const __m512 scale = _mm512_set1_ps(p.scale), ninf = _mm512_set1_ps(kNegInf);
  const __mmask16 rows = lanes(R);
  __m512 part[8];
  for (int r = 0; r < 8; ++r) part[r] = ninf;
  _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) {
    for (int v = 0; v < 4; ++v) s[r][v] = _mm512_mask_mul_ps(ninf, km[v], s[r][v], scale);  // keys past kb: -inf
    part[r] = _mm512_max_ps(_mm512_max_ps(s[r][0], s[r][1]), _mm512_max_ps(s[r][2], s[r][3]));
  }
  const __m512 m_old = _mm512_mask_loadu_ps(ninf, rows, st.m);
  const __m512 m_new = _mm512_max_ps(reduce8(part, [](__m512 a, __m512 b) { return _mm512_max_ps(a, b); }), m_old);
  alignas(64) float alpha[16], m[16];
  _mm512_store_ps(alpha, vmath::exp_avx512(_mm512_sub_ps(m_old, m_new)));
  _mm512_store_ps(m, m_new);
  _mm512_mask_storeu_ps(st.m, rows, m_new);
  _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) {
    const __m512 vm = _mm512_set1_ps(m[r]);
    __m512 sum = _mm512_setzero_ps();
    for (int v = 0; v < 4; ++v) {
      const __m512 e = vmath::exp_avx512(_mm512_sub_ps(s[r][v], vm));
      sum = _mm512_add_ps(sum, e);
      _mm512_storeu_ps(pb + r * kKeys + 16 * v, e);
    }
    part[r] = sum;
  }
  const __m512 sums = reduce8(part, [](__m512 a, __m512 b) { return _mm512_add_ps(a, b); });
  const __m512 l = _mm512_maskz_loadu_ps(rows, st.l);
  _mm512_mask_storeu_ps(st.l, rows, _mm512_fmadd_ps(l, _mm512_load_ps(alpha), sums));
  for (int64_t c0 = 0; c0 < p.dv; c0 += 64) {
    const __mmask16 vmask[4] = {lanes(p.dv - c0), lanes(p.dv - c0 - 16), lanes(p.dv - c0 - 32), lanes(p.dv - c0 - 48)};
    __m512 a0[R], a1[R], a2[R], a3[R];
    _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) {
      const float* o = st.o + r * p.dv + c0;
      const __m512 f = _mm512_set1_ps(alpha[r]);
      a0[r] = _mm512_mul_ps(_mm512_maskz_loadu_ps(vmask[0], o), f);
      a1[r] = _mm512_mul_ps(_mm512_maskz_loadu_ps(vmask[1], o + 16), f);
      a2[r] = _mm512_mul_ps(_mm512_maskz_loadu_ps(vmask[2], o + 32), f);
      a3[r] = _mm512_mul_ps(_mm512_maskz_loadu_ps(vmask[3], o + 48), f);
    }
    for (int k = 0; k < kb; ++k) {
      const float* vr = p.v + (j0 + k) * p.v_stride + c0;
      const __m512 v0 = _mm512_maskz_loadu_ps(vmask[0], vr), v1 = _mm512_maskz_loadu_ps(vmask[1], vr + 16);
      const __m512 v2 = _mm512_maskz_loadu_ps(vmask[2], vr + 32), v3 = _mm512_maskz_loadu_ps(vmask[3], vr + 48);
      vmath::rank1_update4<R>(pb + k, kKeys, v0, v1, v2, v3, a0, a1, a2, a3);
    }
    _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) {
      float* o = st.o + r * p.dv + c0;
      _mm512_mask_storeu_ps(o, vmask[0], a0[r]), _mm512_mask_storeu_ps(o + 16, vmask[1], a1[r]);
      _mm512_mask_storeu_ps(o + 32, vmask[2], a2[r]), _mm512_mask_storeu_ps(o + 48, vmask[3], a3[r]);
    }
  }
}

}  // namespace

bool blocked_applies(const Problem& p) {
  return !p.mask && !p.causal && !p.k_rows && p.sq >= kBlockRows && p.sk >= kKeys && p.dv >= 48;
}

void run_blocked_avx512(const Problem& p, float* scratch) {
  const int64_t group = kBlockRows * kTilesPerBlock;
  std::vector<float> o(static_cast<size_t>(group * p.dv)), m(group), l(group), pb(kBlockRows * kKeys);
  for (int64_t g0 = 0; g0 < p.sq; g0 += group) {
    const int64_t rows = std::min(group, p.sq - g0);
    std::fill(o.begin(), o.end(), 0.f);
    std::fill(m.begin(), m.end(), kNegInf);
    std::fill(l.begin(), l.end(), 0.f);
    for (int64_t j0 = 0; j0 < p.sk; j0 += kKeys) {
      const int kb = static_cast<int>(std::min<int64_t>(kKeys, p.sk - j0));
      for_each_block(rows, [&]<int R>(int64_t t0) {
        tile_block<R>(p, g0 + t0, j0, kb, TileState{m.data() + t0, l.data() + t0, o.data() + t0 * p.dv}, pb.data());
      });
    }
    for (int64_t r = 0; r < rows; ++r) {
      float* out = p.out + (g0 + r) * p.out_stride;
      if (l[r] > 0 && std::isfinite(l[r]) && std::isfinite(m[r])) {
        const float inv = 1.f / l[r];
        for (int64_t c = 0; c < p.dv; ++c) out[c] = o[r * p.dv + c] * inv;
      } else {  // infinities or NaN among the scores: the row-at-a-time tiles define those cases
        Problem one = p;
        one.q = p.q + (g0 + r) * p.q_stride, one.out = out, one.sq = 1;
        run_avx512(one, scratch);
      }
    }
  }
}

}  // namespace mminfer::kernels::attention
