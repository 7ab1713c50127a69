// MatMulNBits (com.microsoft): Y = A * dequant(B)^T (+ bias), B quantized to 2, 4 or 8 bits in
// blocks along K, each block with its own scale and zero point:
//   weight[n, k] = (q[n, k] - zero_point[n, block]) * scale[n, block],  block = k / block_size
// q is packed low bits first along K: row n holds k_blocks blobs of block_size * bits / 8 bytes.
// Zero points are packed the same way per row (uint8) or given as floats; absent, 2^(bits-1).
#pragma once
#include <cstdint>

namespace mminfer::kernels {

struct NBitsWeights {
  int64_t K = 0, N = 0;
  int bits = 4;
  int64_t block_size = 32;
  const uint8_t* packed = nullptr;     // [N, k_blocks, blob_bytes()]
  const float* scales = nullptr;       // [N, k_blocks]
  const uint8_t* zp_packed = nullptr;  // [N, zp_row_bytes()], or null
  const float* zp_float = nullptr;     // [N, k_blocks], or null
  const int32_t* g_idx = nullptr;      // [K]: the block of each k (deprecated form), or null

  int64_t k_blocks() const { return (K + block_size - 1) / block_size; }
  int64_t blob_bytes() const { return block_size * bits / 8; }
  int64_t zp_row_bytes() const { return (k_blocks() * bits + 7) / 8; }
  // The quantized value at (n, k) and the zero point of (n, block).
  int q(int64_t n, int64_t k) const {
    return unpack(packed + (n * k_blocks() + k / block_size) * blob_bytes(), k % block_size, bits);
  }
  float zero_point(int64_t n, int64_t block) const {
    if (zp_float) return zp_float[n * k_blocks() + block];
    if (zp_packed) return static_cast<float>(unpack(zp_packed + n * zp_row_bytes(), block, bits));
    return static_cast<float>(1 << (bits - 1));
  }
  // The `bits`-wide field at element index i of a low-first packed byte stream.
  static int unpack(const uint8_t* p, int64_t i, int bits) {
    int64_t bit = i * bits;
    return (p[bit / 8] >> (bit % 8)) & ((1 << bits) - 1);
  }
};

// Y[M, N] = A[M, K] * W^T + bias (bias: N values or null). The plain twin: dequantizes the whole
// weight, then multiplies with a scalar loop. For tests and for the forms the fast path skips.
void matmul_nbits_reference(const NBitsWeights& w, const float* a, int64_t M, const float* bias, float* y);

// Whether matmul_nbits_fast handles `w` (bits 4 or 8, no g_idx).
bool matmul_nbits_fast_supported(const NBitsWeights& w);
// The same product, dequantizing on the fly: M == 1 streams the packed weight once (a GEMV on
// AVX-512 or AVX2, picked by cpu_features()); M > 1 dequantizes panels of columns to FP32 and
// runs the FP32 GEMM on each.
void matmul_nbits_fast(const NBitsWeights& w, const float* a, int64_t M, const float* bias, float* y);

// accuracy_level 4 as ONNX Runtime's CPU kernels compute it: each row of A[M, K] rounded to int8
// per block of block_size (scale max|a| / 127, round to nearest even), written back as floats.
void round_activations_to_int8_blocks(const float* a, int64_t M, int64_t K, int64_t block_size, float* out);

// The instruction set of the int8 product below.
enum class NBitsInt8Isa { kAuto, kAvx2, kAvxVnni, kAvx512Vnni };
// accuracy_level 4 on the forms matmul_nbits_fast handles: the same result as rounding A with
// round_activations_to_int8_blocks and running the reference, but as integer dot products of the
// codes (nbits_int8_dot.h), each weight byte read once whatever M is. kAuto picks the widest ISA
// cpu_features() allows, or from 128 rows the FP32 GEMM on the rounded activations (the same
// product, faster there); the others are for tests (the CPU must have them).
void matmul_nbits_int8(const NBitsWeights& w, const float* a, int64_t M, const float* bias, float* y,
                       NBitsInt8Isa isa = NBitsInt8Isa::kAuto);

// Internal: y[m, n] += bias[n] for M rows of N; nothing when bias is null.
void add_bias_rows(float* y, const float* bias, int64_t M, int64_t N);

// Internal: one ISA's GEMV over columns [n0, n1), `a` zero-padded to k_blocks * block_size and
// `a_block_sums` its sum per block (for the zero points).
void nbits_gemv_avx2(const NBitsWeights& w, const float* a, const float* a_block_sums, int64_t n0, int64_t n1, float* y);
void nbits_gemv_avx512(const NBitsWeights& w, const float* a, const float* a_block_sums, int64_t n0, int64_t n1,
                       float* y);

}  // namespace mminfer::kernels
