// Scaled dot-product attention for one (batch, head), tile by tile: the math under the
// mminfer::Attention kernel (attention_kernel.cpp).
#include "kernels/cpu/nn/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/common/vector_math.h"
#include "kernels/cpu/math/softmax_simd.h"

namespace mminfer::kernels {

namespace attention {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Turns one row of raw scores into probabilities in place (scale, mask, causal cut, softmax).
void softmax_row(float* s, const float* mask, int64_t sk, int64_t visible, float scale) {
  float m = kNegInf;
  for (int64_t j = 0; j < sk; ++j) {
    float x = j < visible ? s[j] * scale + (mask ? mask[j] : 0.f) : kNegInf;
    s[j] = x;
    if (x > m || std::isnan(x)) m = x;
    if (std::isnan(m)) break;
  }
  if (std::isnan(m)) {
    for (int64_t j = 0; j < sk; ++j) s[j] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  if (m == kNegInf) {  // nothing visible: a tie between every key
    for (int64_t j = 0; j < sk; ++j) s[j] = 1.f / static_cast<float>(sk);
    return;
  }
  if (m == -kNegInf) {  // +inf scores share the mass
    int64_t count = 0;
    for (int64_t j = 0; j < sk; ++j) count += s[j] == m;
    for (int64_t j = 0; j < sk; ++j) s[j] = s[j] == m ? 1.f / static_cast<float>(count) : 0.f;
    return;
  }
  float sum = 0.f;
  for (int64_t j = 0; j < sk; ++j) {
    s[j] = vmath::exp_scalar(s[j] - m);
    sum += s[j];
  }
  float inv = 1.f / sum;
  for (int64_t j = 0; j < sk; ++j) s[j] *= inv;
}

}  // namespace

int64_t visible_keys(const Problem& p, int64_t i) {
  int64_t v = p.sk;
  if (p.causal) {
    v = i + (p.sk - p.sq) + 1;
    v = v < 0 ? 0 : (v > p.sk ? p.sk : v);
  }
  // Trailing keys the mask rules out (a causal mask written as an additive tensor, padding)
  // need no scores: their probability is exactly 0 next to any key the row does see, and a row
  // that sees none is a tie between every key either way.
  if (const float* m = mask_row(p, i))
    while (v > 0 && m[v - 1] <= kMaskedOut) --v;
  return v;
}

const float* mask_row(const Problem& p, int64_t i) { return p.mask ? p.mask + i * p.mask_row_stride : nullptr; }

void run_reference(const Problem& p) {
  std::vector<float> s(static_cast<size_t>(p.sk));
  for (int64_t i = 0; i < p.sq; ++i) {
    for (int64_t j = 0; j < p.sk; ++j) {
      float acc = 0.f;
      for (int64_t c = 0; c < p.d; ++c) acc += p.q[i * p.q_stride + c] * kt_at(p, c, j);
      s[j] = acc;
    }
    softmax_row(s.data(), mask_row(p, i), p.sk, visible_keys(p, i), p.scale);
    for (int64_t c = 0; c < p.dv; ++c) {
      float acc = 0.f;
      for (int64_t j = 0; j < p.sk; ++j) acc += s[j] * p.v[j * p.v_stride + c];
      p.out[i * p.out_stride + c] = acc;
    }
  }
}

namespace {

// Raw scores → logits in place: scale, add the mask row, and hide keys past `visible` (causal).
void prepare_row(float* s, const float* mask, int64_t sk, int64_t visible, float scale) {
  const __m256 vs = _mm256_set1_ps(scale);
  if (mask)
    for (int64_t j = 0; j < visible; j += 8) {
      __m256i m = vmath::tail_mask(std::min<int64_t>(8, visible - j));
      __m256 x = _mm256_fmadd_ps(_mm256_maskload_ps(s + j, m), vs, _mm256_maskload_ps(mask + j, m));
      _mm256_maskstore_ps(s + j, m, x);
    }
  else
    vmath::map_avx2(s, s, visible, [&](__m256 x) { return _mm256_mul_ps(x, vs); });
  for (int64_t j = visible; j < sk; ++j) s[j] = kNegInf;
}

// Loads 16 floats (two vectors) of which the first `w` are real; the rest read as 0.
struct Pair {
  __m256i m0, m1;
  bool full;
  explicit Pair(int64_t w)
      : m0(vmath::tail_mask(std::min<int64_t>(w, 8))), m1(vmath::tail_mask(std::max<int64_t>(w - 8, 0))), full(w >= 16) {}
  __m256 lo(const float* p) const { return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m0); }
  __m256 hi(const float* p) const { return full ? _mm256_loadu_ps(p + 8) : _mm256_maskload_ps(p + 8, m1); }
  void store(float* p, __m256 a, __m256 b) const {
    if (full) {
      _mm256_storeu_ps(p, a);
      _mm256_storeu_ps(p + 8, b);
    } else {
      _mm256_maskstore_ps(p, m0, a);
      _mm256_maskstore_ps(p + 8, m1, b);
    }
  }
};

// S[r][j] = Σ_c Q[i0+r][c]·Kᵀ[c][j] for R query rows and keys [0, keys), 16 keys per step.
template <int R>
void scores_tile(const Problem& p, int64_t i0, int64_t keys, float* s) {
  for (int64_t j = 0; j < keys; j += 16) {
    Pair io(keys - j);
    __m256 a[R], b[R];
    for (int r = 0; r < R; ++r) a[r] = b[r] = _mm256_setzero_ps();
    const float* q = p.q + i0 * p.q_stride;
    for (int64_t c = 0; c < p.d; ++c) {
      const float* kr = p.kt + c * p.kt_stride + j;
      __m256 k0 = io.lo(kr), k1 = io.hi(kr);
      for (int r = 0; r < R; ++r) {
        __m256 qv = _mm256_set1_ps(q[r * p.q_stride + c]);
        a[r] = _mm256_fmadd_ps(qv, k0, a[r]);
        b[r] = _mm256_fmadd_ps(qv, k1, b[r]);
      }
    }
    for (int r = 0; r < R; ++r) io.store(s + r * p.sk + j, a[r], b[r]);
  }
}

// out[i0+r][:] = Σ_{j < keys} P[r][j]·V[j][:] for R rows, 16 output columns per step.
template <int R>
void values_tile(const Problem& p, int64_t i0, int64_t keys, const float* s) {
  for (int64_t c = 0; c < p.dv; c += 16) {
    Pair io(p.dv - c);
    __m256 a[R], b[R];
    for (int r = 0; r < R; ++r) a[r] = b[r] = _mm256_setzero_ps();
    for (int64_t j = 0; j < keys; ++j) {
      const float* vr = p.v + j * p.v_stride + c;
      __m256 v0 = io.lo(vr), v1 = io.hi(vr);
      for (int r = 0; r < R; ++r) {
        __m256 pv = _mm256_set1_ps(s[r * p.sk + j]);
        a[r] = _mm256_fmadd_ps(pv, v0, a[r]);
        b[r] = _mm256_fmadd_ps(pv, v1, b[r]);
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

BlockKeys block_keys(const Problem& p, int64_t i0, int rows) {
  // Keys no row of the block can see need no scores; a row that sees none averages all keys.
  BlockKeys k{0, 0};
  for (int r = 0; r < rows; ++r) {
    int64_t v = visible_keys(p, i0 + r);
    k.seen = std::max(k.seen, v);
    k.used = std::max(k.used, v == 0 ? p.sk : v);
  }
  return k;
}

void softmax_rows(const Problem& p, int64_t i0, int rows, float* s) {
  for (int r = 0; r < rows; ++r) {
    float* row = s + r * p.sk;
    prepare_row(row, mask_row(p, i0 + r), p.sk, visible_keys(p, i0 + r), p.scale);
    softmax_simd::row_avx2(row, row, p.sk, false);
  }
}

void run_avx2(const Problem& p, float* scratch) {
  for_each_block(p.sq, [&]<int R>(int64_t i0) { block<R>(p, i0, scratch); });
}

}  // namespace attention

}  // namespace mminfer::kernels
