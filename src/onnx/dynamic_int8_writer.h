// Writes MatMuls in ONNX Runtime's dynamic INT8 form, so the file runs on any ONNX runtime:
//     Xq, Xs, Xz = DynamicQuantizeLinear(X)                   (one per distinct X)
//     Y = Mul(Cast<float>(MatMulInteger(Xq, Wq, Xz, 0)), Mul(Xs, Ws))
// Wq is int8, symmetric, one scale per output column (Ws, [N]): finer than quantize_dynamic's
// per-tensor default, and still plain ONNX. mminfer reads this form back onto its fused INT8
// GEMM (passes/absorb_dynamic_quantization.cpp).
#pragma once
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

namespace mminfer::onnx_io {

// MatMul nodes that can take the form (a constant float32 [K, N] B), by first output name, in
// graph order.
std::vector<std::string> dynamic_int8_candidates(const onnx::ModelProto& model);

// Rewrites the candidates whose first output is in `targets`; float weights nothing reads any
// more are dropped. Returns how many MatMuls changed.
int write_dynamic_int8(onnx::ModelProto& model, const std::set<std::string>& targets, const std::string& base_dir);

}  // namespace mminfer::onnx_io
