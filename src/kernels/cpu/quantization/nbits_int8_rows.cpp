// The activation side of the int8 MatMulNBits kernels (nbits_int8_dot.h): A's rows as int8 codes
// per block, in the order the weight codes unpack to, with the per-lane and per-block scales.
#include <algorithm>
#include <array>
#include <cmath>

#include <immintrin.h>

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

// max |x[i]|, a NaN skipped as std::max(amax, |x|) skips it (max_ps returns its second operand
// when either is NaN).
float abs_max(const float* x, int64_t n) {
  const __m256 sign = _mm256_set1_ps(-0.f);
  __m256 m = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)), m);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  float amax = 0.f;
  for (float v : lanes) amax = std::max(amax, v);
  for (; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax;
}

// codes[i] = round-to-nearest-even(x[i] * inverse) for i < n (|x * inverse| <= 127); returns
// their sum. The vector conversion rounds as nearbyint does under the default rounding mode.
int32_t round_to_codes(const float* x, int64_t n, float inverse, int8_t* codes) {
  const __m256 inv = _mm256_set1_ps(inverse);
  __m256i sum = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i lo = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
    const __m256i hi = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8), inv));
    sum = _mm256_add_epi32(sum, _mm256_add_epi32(lo, hi));
    // Packing works per 128-bit half: [lo0 hi0 lo1 hi1] as int16, then the halves back in order.
    const __m256i words = _mm256_permute4x64_epi64(_mm256_packs_epi32(lo, hi), 0xD8);
    const __m128i bytes = _mm_packs_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + i), bytes);
  }
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), sum);
  int32_t total = 0;
  for (int32_t v : lanes) total += v;
  for (; i < n; ++i) {
    const int c = static_cast<int>(std::nearbyint(x[i] * inverse));
    codes[i] = static_cast<int8_t>(c);
    total += c;
  }
  return total;
}

}  // namespace

void quantize_int8_rows(const NBitsWeights& w, const float* a, int64_t M, int64_t group, Int8Rows& out, bool lane_scales) {
  const int64_t K = w.K, bs = w.block_size, kb = w.k_blocks();
  const int64_t kpad = (kb * bs + 127) / 128 * 128, lanes = kpad / 4;
  out.M = M;
  out.kpad = kpad;
  out.group = group;
  // Codes past K stay zero. 8-bit codes keep K's order, so only each row's tail needs clearing.
  if (w.bits == 8) {
    out.codes.resize(static_cast<size_t>(M * kpad));
    for (int64_t m = 0; m < M; ++m) std::fill(out.codes.begin() + m * kpad + K, out.codes.begin() + (m + 1) * kpad, int8_t{0});
  } else {
    out.codes.assign(static_cast<size_t>(M * kpad), 0);
  }
  if (lane_scales) out.lane_scale.resize(static_cast<size_t>(M * lanes));
  out.block_sum.resize(static_cast<size_t>(M * kb));
  // The lanes' blocks depend on the weight's form only: a decode step's calls reuse them.
  const std::array<int64_t, 4> form = {w.bits, group, bs, kpad};
  if (form != out.lane_form) {
    out.lane_form = form;
    out.lane_block.resize(static_cast<size_t>(lanes));
    for (int64_t l = 0; l < lanes; ++l) out.lane_block[static_cast<size_t>(l)] = static_cast<int32_t>(k_at(w.bits, group, 4 * l) / bs);
  }
  out.block_scale.resize(static_cast<size_t>(M * kb));
  for (int64_t m = 0; m < M; ++m) {
    const float* row = a + m * K;
    float* scale = out.block_scale.data() + m * kb;
    int8_t* codes = out.codes.data() + m * kpad;
    for (int64_t b = 0; b < kb; ++b) {
      const int64_t k0 = b * bs, k1 = std::min(K, k0 + bs);
      const float amax = abs_max(row + k0, k1 - k0);
      // Exactly round_activations_to_int8_blocks: scale amax / 127, round to nearest even.
      const float s = amax / 127.f, inverse = amax != 0.f ? 127.f / amax : 0.f;
      int32_t sum = 0;
      if (w.bits == 8) {
        sum = round_to_codes(row + k0, k1 - k0, inverse, codes + k0);
      } else {
        for (int64_t k = k0; k < k1; ++k) {
          const int c = static_cast<int>(std::nearbyint(row[k] * inverse));
          codes[position(w.bits, group, k)] = static_cast<int8_t>(c);
          sum += c;
        }
      }
      scale[b] = s;
      out.block_sum[static_cast<size_t>(m * kb + b)] = s * static_cast<float>(sum);
    }
    if (!lane_scales) continue;
    float* ls = out.lane_scale.data() + m * lanes;
    for (int64_t l = 0; l < lanes; ++l) {
      const int32_t b = out.lane_block[static_cast<size_t>(l)];
      ls[l] = b < kb ? scale[b] : 0.f;
    }
  }
}

}  // namespace mminfer::kernels
