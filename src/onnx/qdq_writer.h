// Writes static INT8 in the QDQ form (what onnxruntime.quantization.quantize_static writes, so
// ONNX Runtime and other runtimes load it too):
//     X' = DequantizeLinear(QuantizeLinear(X, s, zp), s, zp)    per activation, calibrated range
//     W' = DequantizeLinear(Wq, Ws, 0, axis)                     int8 weights per output channel
// Activations take uint8 over their range widened to hold 0 (s = (hi - lo) / 255, zp = -lo / s),
// weights int8 symmetric, ONNX Runtime's default pairing. Per-channel weights need opset 13; in opset 10-12 files the weights stay
// float (a runtime quantizes them itself), and before opset 10 there is no QuantizeLinear.
#pragma once
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <onnx/onnx_pb.h>

namespace mminfer::onnx_io {

// MatMul with a constant float [K, N] B and Conv with a constant float 4-D W: first output name
// -> the activation it reads (input 0), in graph order.
std::vector<std::pair<std::string, std::string>> qdq_candidates(const onnx::ModelProto& model);

// Rewrites the candidates whose first output is in `targets`, with `ranges` (activation ->
// [lo, hi]) for their activations. Throws Error when the opset has no QuantizeLinear or a
// target's activation has no range. Returns how many nodes changed.
int write_qdq(onnx::ModelProto& model, const std::set<std::string>& targets,
              const std::map<std::string, std::pair<float, float>>& ranges, const std::string& base_dir);

}  // namespace mminfer::onnx_io
