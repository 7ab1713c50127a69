// Writes MatMul weights in ONNX Runtime's weight-only quantized form:
//     MatMul(A, W[K, N] float constant)  ->  com.microsoft MatMulNBits(A, B, scales [, zero_points])
// bits 4 or 8, blocks of block_size values along K, each with a float scale and, unless
// symmetric, a uint8 zero point (packed like B). The layout is kernels/cpu/quantization/
// matmul_nbits.h's; ONNX Runtime and mminfer both run the result.
#pragma once
#include <string>

#include <onnx/onnx_pb.h>

#include "mminfer/tensor.h"

namespace mminfer::onnx_io {

struct NBitsOptions {
  int bits = 4;              // 4 or 8
  int64_t block_size = 32;   // a power of two, 16 to 256
  bool symmetric = false;    // true: no zero points (the op's default 2^(bits-1))
  int64_t accuracy_level = 4;  // 4: int8 activations allowed (ONNX Runtime's and mminfer's fast path); 0: FP32
};

struct NBitsWeight {
  Tensor b;            // uint8 [N, k_blocks, block_size * bits / 8]
  Tensor scales;       // float32 [N, k_blocks]
  Tensor zero_points;  // uint8 [N, ceil(k_blocks * bits / 8)]; undefined when symmetric
};

// Quantizes a row-major float [K, N] weight (finite values). Per block: symmetric, the value of
// largest magnitude v gets scale v / -2^(bits-1) (code 0; only -v itself would clip, by one
// step); asymmetric, the range [min(w, 0), max(w, 0)] maps onto [0, 2^bits - 1].
NBitsWeight quantize_nbits(const float* w, int64_t K, int64_t N, const NBitsOptions& opt);

// Rewrites every default-domain MatMul whose B is a float32 [K, N] initializer with finite values
// (K at least block_size), in subgraphs too (a merged decoder's If branches; the quantized
// weights join the main graph, where both branches see them), and imports com.microsoft.
// `keep_float`: an ECMAScript regex searched in each MatMul's node name and weight name; matches
// stay float ("lm_head" keeps a language model's output projection); empty: none.
// Returns how many MatMuls changed; throws Error on options outside the ranges above or a
// keep_float that is not a valid regex. External weights are read one at a time, so the float
// copies never all stand in memory at once (mminfer quantizes decoders this way as it loads).
int write_nbits_weights(onnx::ModelProto& model, const NBitsOptions& opt, const std::string& base_dir,
                        const std::string& keep_float = "");

}  // namespace mminfer::onnx_io
