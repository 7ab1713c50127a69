// The activation side of the int8 MatMulNBits kernels (nbits_int8_dot.h): A's rows as int8 codes
// per block, in the order the weight codes unpack to, with the per-lane and per-block scales.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "kernels/cpu/quantization/nbits_int8_dot.h"

namespace mminfer::kernels {

namespace {

// Where the code of k goes: 8 bits keep K's order; 4 bits put, per `group` values (a power of
// two), the even k first.
int64_t position(int bits, int64_t group, int64_t k) {
  if (bits != 4) return k;
  const int64_t r = k & (group - 1);
  return (k - r) + (r & 1 ? group / 2 : 0) + r / 2;
}

// The k whose code lands at position p (the inverse of position()).
int64_t k_at(int bits, int64_t group, int64_t p) {
  if (bits != 4) return p;
  const int64_t r = p & (group - 1);
  return (p - r) + (r < group / 2 ? 2 * r : 2 * (r - group / 2) + 1);
}

}  // namespace

void quantize_int8_rows(const NBitsWeights& w, const float* a, int64_t M, int64_t group, Int8Rows& out) {
  const int64_t K = w.K, bs = w.block_size, kb = w.k_blocks();
  const int64_t kpad = (kb * bs + 127) / 128 * 128, lanes = kpad / 4;
  out.M = M;
  out.kpad = kpad;
  out.group = group;
  out.codes.assign(static_cast<size_t>(M * kpad), 0);
  out.lane_scale.resize(static_cast<size_t>(M * lanes));
  out.block_sum.resize(static_cast<size_t>(M * kb));
  out.block_sum_t.assign(static_cast<size_t>((M + 7) / 8 * kb * 8), 0.f);
  // The lanes' blocks depend on the weight's form only: a decode step's calls reuse them.
  const std::array<int64_t, 4> form = {w.bits, group, bs, kpad};
  if (form != out.lane_form) {
    out.lane_form = form;
    out.lane_block.resize(static_cast<size_t>(lanes));
    for (int64_t l = 0; l < lanes; ++l) out.lane_block[static_cast<size_t>(l)] = static_cast<int32_t>(k_at(w.bits, group, 4 * l) / bs);
  }
  std::vector<float>& scale = out.block_scale;
  scale.resize(static_cast<size_t>(kb));
  for (int64_t m = 0; m < M; ++m) {
    const float* row = a + m * K;
    int8_t* codes = out.codes.data() + m * kpad;
    for (int64_t b = 0; b < kb; ++b) {
      const int64_t k0 = b * bs, k1 = std::min(K, k0 + bs);
      float amax = 0.f;
      for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(row[k]));
      // Exactly round_activations_to_int8_blocks: scale amax / 127, round to nearest even.
      const float s = amax / 127.f, inverse = amax != 0.f ? 127.f / amax : 0.f;
      int32_t sum = 0;
      for (int64_t k = k0; k < k1; ++k) {
        const int c = static_cast<int>(std::nearbyint(row[k] * inverse));
        codes[position(w.bits, group, k)] = static_cast<int8_t>(c);
        sum += c;
      }
      scale[static_cast<size_t>(b)] = s;
      out.block_sum[static_cast<size_t>(m * kb + b)] = s * static_cast<float>(sum);
      out.block_sum_t[static_cast<size_t>(((m / 8) * kb + b) * 8 + m % 8)] = s * static_cast<float>(sum);
    }
    float* ls = out.lane_scale.data() + m * lanes;
    for (int64_t l = 0; l < lanes; ++l) {
      const int32_t b = out.lane_block[static_cast<size_t>(l)];
      ls[l] = b < kb ? scale[static_cast<size_t>(b)] : 0.f;
    }
  }
}

void nbits_zero_point_corrections(const NBitsWeights& w, const Int8Rows& q, int64_t n, int64_t m0, int64_t rows,
                                  float* zs, float* corr) {
  const int64_t kb = w.k_blocks();
  const float* s = w.scales + n * kb;
  const float* weights = zs;  // what multiplies the rows' block sums: s * zp, or s (times zp later)
  float factor = 1.f;
  int64_t b = 0;
  if (w.zp_float) {
    const float* z = w.zp_float + n * kb;
    for (; b + 8 <= kb; b += 8) _mm256_storeu_ps(zs + b, _mm256_mul_ps(_mm256_loadu_ps(s + b), _mm256_loadu_ps(z + b)));
    for (; b < kb; ++b) zs[b] = s[b] * z[b];
  } else if (w.zp_packed && w.bits == 8) {
    const uint8_t* z = w.zp_packed + n * w.zp_row_bytes();
    for (; b + 8 <= kb; b += 8) {
      const __m256 zf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(z + b))));
      _mm256_storeu_ps(zs + b, _mm256_mul_ps(_mm256_loadu_ps(s + b), zf));
    }
    for (; b < kb; ++b) zs[b] = s[b] * static_cast<float>(z[b]);
  } else if (w.zp_packed) {  // 4 bits: blocks 2i and 2i + 1 in the low and high nibble of byte i
    const uint8_t* z = w.zp_packed + n * w.zp_row_bytes();
    const __m128i low4 = _mm_set1_epi8(0x0f);
    for (; b + 8 <= kb; b += 8) {
      int32_t four;
      std::memcpy(&four, z + b / 2, 4);
      const __m128i v = _mm_cvtsi32_si128(four);
      const __m128i codes = _mm_unpacklo_epi8(_mm_and_si128(v, low4), _mm_and_si128(_mm_srli_epi16(v, 4), low4));
      const __m256 zf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(codes));
      _mm256_storeu_ps(zs + b, _mm256_mul_ps(_mm256_loadu_ps(s + b), zf));
    }
    for (; b < kb; ++b) zs[b] = s[b] * static_cast<float>(NBitsWeights::unpack(z, b, w.bits));
  } else {  // the default zero point, the same for every block
    weights = s;
    factor = static_cast<float>(1 << (w.bits - 1));
  }
  if (rows > 2 && (m0 % 8) + rows <= 8) {  // eight rows' sums a vector, one block a step
    const float* bt = q.block_sum_t.data() + (m0 / 8) * kb * 8;
    __m256 t0 = _mm256_setzero_ps(), t1 = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 2 <= kb; k += 2) {
      t0 = _mm256_fmadd_ps(_mm256_set1_ps(weights[k]), _mm256_loadu_ps(bt + k * 8), t0);
      t1 = _mm256_fmadd_ps(_mm256_set1_ps(weights[k + 1]), _mm256_loadu_ps(bt + k * 8 + 8), t1);
    }
    if (k < kb) t0 = _mm256_fmadd_ps(_mm256_set1_ps(weights[k]), _mm256_loadu_ps(bt + k * 8), t0);
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, _mm256_mul_ps(_mm256_add_ps(t0, t1), _mm256_set1_ps(factor)));
    for (int64_t r = 0; r < rows; ++r) corr[r] = lanes[m0 % 8 + r];
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float* bsum = q.block_sum.data() + (m0 + r) * kb;
    __m256 t = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= kb; k += 8) t = _mm256_fmadd_ps(_mm256_loadu_ps(weights + k), _mm256_loadu_ps(bsum + k), t);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    float sum = _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
    for (; k < kb; ++k) sum += weights[k] * bsum[k];
    corr[r] = sum * factor;
  }
}

}  // namespace mminfer::kernels
