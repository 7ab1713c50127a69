// MatMulNBits with int8 activations (accuracy_level 4): A is quantized per row and per block as
// round_activations_to_int8_blocks does, and each block's product is an integer dot product of the
// weight codes (u8) with the activation codes (s8), exact in int32:
//   y[m, n] = sum_b s_w[n, b] * s_a[m, b] * (sum_k q[n, k] * c[m, k] - zp[n, b] * sum_k c[m, k])
// The kernels read a vector of weight bytes at a time (32 for AVX2 and AVX-VNNI, 64 for AVX-512
// VNNI), each 32-bit lane of the dot product covering 4 bytes. 8-bit weights are read in K's
// order. At 4 bits a vector holds twice as many values of K, split into its low nibbles (the even
// k) and high nibbles (the odd k), so the activation codes are stored in that order: per group
// of two vectors' worth of K (64 or 128 values), the even k, then the odd k. The two halves'
// lanes then cover the same blocks, and the weights need no shuffle.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "kernels/cpu/quantization/matmul_nbits.h"

namespace mminfer::kernels {

// A[M, K] quantized for one weight's bits and block size.
struct Int8Rows {
  int64_t M = 0, kpad = 0;   // kpad: k_blocks * block_size rounded up to 128 (zero codes after)
  int64_t group = 0;          // 4 bits: the K values whose even and odd codes are stored apart
  std::vector<int8_t> codes;  // [M, kpad], in the bits' order (above)
  std::vector<float> lane_scale;  // [M, kpad / 4]: s_a of the block each 32-bit lane covers (0 past K)
  std::vector<float> block_sum;   // [M, k_blocks]: s_a * sum of the block's codes (for the zero points)
  std::vector<int32_t> lane_block;  // [kpad / 4]: the block each 32-bit lane covers
  std::array<int64_t, 4> lane_form{};  // bits, group, block size and kpad lane_block was made for
  std::vector<float> block_scale;      // [M, k_blocks]: s_a of each block
};

// Fills `out` (reusing its storage) from A[M, K] for weight `w`; `group`: twice the kernel's
// vector bytes (64 or 128). Without `lane_scales`, lane_scale is left alone (the tiled kernel
// reads block_scale only).
void quantize_int8_rows(const NBitsWeights& w, const float* a, int64_t M, int64_t group, Int8Rows& out,
                        bool lane_scales = true);

// One ISA's kernel: y[m, n] (row stride N, no bias) for all rows m < q.M and columns [n0, n1).
void nbits_int8_dot_avx2(const NBitsWeights& w, const Int8Rows& q, int64_t n0, int64_t n1, float* y);
void nbits_int8_dot_avxvnni(const NBitsWeights& w, const Int8Rows& q, int64_t n0, int64_t n1, float* y);
void nbits_int8_dot_avx512vnni(const NBitsWeights& w, const Int8Rows& q, int64_t n0, int64_t n1, float* y);

}  // namespace mminfer::kernels
