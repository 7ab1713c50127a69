// The activation side of the int8 MatMulNBits kernels (nbits_int8_dot.h): A's rows as int8 codes
// per block, in the order the weight codes unpack to, with the per-lane and per-block scales.
#include <algorithm>
#include <array>
#include <cmath>

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
      scale[b] = s;
      out.block_sum[static_cast<size_t>(m * kb + b)] = s * static_cast<float>(sum);
    }
    float* ls = out.lane_scale.data() + m * lanes;
    for (int64_t l = 0; l < lanes; ++l) {
      const int32_t b = out.lane_block[static_cast<size_t>(l)];
      ls[l] = b < kb ? scale[b] : 0.f;
    }
  }
}

}  // namespace mminfer::kernels
