// MatMulNBits weights in column tiles, for the int8 products of accuracy_level 4 on AVX-512
// VNNI. In the ONNX layout each 32-bit lane of a dot product covers 4 values of K, so every
// 64 weight bytes need their own conversion and per-block scaling, and that work, not memory,
// bounded a decode step. Tiled, each lane is a column: a tile holds 64 columns as 4 groups of 16,
// and a vector holds 4 values of K (8 at 4 bits) for each of a group's columns. The activation's
// 4 codes are broadcast, the products of a whole block sum in int32, and the scales apply once
// per block and column. The tile's bytes follow K, so the weight is one sequential stream.
//
//   codes:       [tiles, K' / per_vector, 4 groups, 64 bytes], K' = k_blocks * block_size
//                8 bits: lane l of group g holds column (g * 16 + l)'s k..k+3, one byte each
//                4 bits: the same lane's low nibbles hold k..k+3 and its high nibbles k+4..k+7
//   scales:      [tiles, k_blocks, 64] floats
//   zero_points: [tiles, k_blocks, 64] bytes (2^(bits-1) where the ONNX weight has none)
// Columns past N are zero codes, scales and zero points.
#pragma once
#include <cstdint>

#include "kernels/cpu/quantization/matmul_nbits.h"

namespace mminfer::kernels {

struct NBitsTiled {
  static constexpr int64_t kTileColumns = 64;

  int64_t K = 0, N = 0;
  int bits = 4;
  int64_t block_size = 32;
  const uint8_t* codes = nullptr;
  const float* scales = nullptr;
  const uint8_t* zero_points = nullptr;

  int64_t k_blocks() const { return (K + block_size - 1) / block_size; }
  int64_t tiles() const { return (N + kTileColumns - 1) / kTileColumns; }
  int64_t tile_code_bytes() const { return k_blocks() * block_size * kTileColumns * bits / 8; }
  int64_t code_bytes() const { return tiles() * tile_code_bytes(); }
  int64_t block_values() const { return tiles() * k_blocks() * kTileColumns; }  // scales and zero points each
};

// Whether this CPU runs the tiled product (AVX-512 BW and VNNI, as cpu_features() allows).
bool nbits_tiled_cpu();
// Whether `w` can be tiled (4 or 8 bits, no g_idx, zero points absent or packed bytes) and
// nbits_tiled_cpu().
bool nbits_tiling_supported(const NBitsWeights& w);

// Writes w's codes, scales and zero points in the tiled layout, into destinations sized by an
// NBitsTiled of w's K, N, bits and block size: code_bytes() bytes, block_values() floats and
// block_values() bytes.
void tile_nbits_weights(const NBitsWeights& w, uint8_t* codes, float* scales, uint8_t* zero_points);

// Y[M, N] = A[M, K] * W^T (+ bias) with A rounded to int8 per block as accuracy_level 4 does
// (round_activations_to_int8_blocks): the same result as matmul_nbits_int8 on the untiled weight.
void matmul_nbits_tiled(const NBitsTiled& t, const float* a, int64_t M, const float* bias, float* y);

struct Int8Rows;
// Internal: the AVX-512 VNNI product of half tiles [half0, half1) (32 columns each: threads share
// a product of 9 tiles 9 : 9 halves rather than 5 : 4 tiles) for every row of `q` (quantized in
// K's order, as for 8-bit weights), no bias.
void nbits_tiled_avx512vnni(const NBitsTiled& t, const Int8Rows& q, int64_t half0, int64_t half1, float* y);

}  // namespace mminfer::kernels
