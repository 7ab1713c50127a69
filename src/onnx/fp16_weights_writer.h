// Writes MatMul weights as FP16 initializers, the standard form ONNX converters use:
//     W16 (FLOAT16 initializer) -> Cast(to = FLOAT) -> MatMul
// Half the bytes on disk; mminfer keeps them as halves in memory too (passes/absorb_fp16_weights.cpp).
#pragma once
#include <set>
#include <string>

#include <onnx/onnx_pb.h>

namespace mminfer::onnx_io {

// Rewrites the MatMuls (constant float [K, N] B, by first output name) in `targets`. Weights
// beyond the half range stay float. Returns how many MatMuls changed.
int write_fp16_weights(onnx::ModelProto& model, const std::set<std::string>& targets, const std::string& base_dir);

}  // namespace mminfer::onnx_io
