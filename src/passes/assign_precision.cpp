// Marks MatMul / FusedMatMul / Gemm nodes with constant float32 weights to run in dynamic INT8,
// with FP16 weights or in BF16 (attribute precision = "int8" / "fp16" / "bf16", read by the kernels; int8_activations =
// "per_tensor" when the policy asks), and Conv / FusedConv ones in INT8 (the kernel keeps the
// convolutions INT8 does not speed up in FP32), as the session's PrecisionPolicy chooses:
//  - by modality (ir/modality.h); nodes where modalities have joined stay FP32;
//  - never a node whose name or op type matches keep_fp32 ("^Conv$" keeps every Conv);
//  - with keep_edges_fp32, never a projection (a quantizable node after which no quantizable
//    node of its modality follows: the embedding projections, the alignment layers feeding a
//    joint part), nor the first and the last other quantizable node of each modality in
//    topological order, where quantization error enters first and is felt most;
//  - BF16 only where the CPU multiplies bfloat16 natively: emulated, it is slower than FP32.
#include <regex>

#include "ir/modality.h"
#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

// The INT8 kernel's int32 accumulators bound K (Int8Gemm::kMaxK); beyond it nodes stay FP32.
constexpr int64_t kMaxK = 65536;

bool constant_f32(const ir::Graph& g, int v, int rank) {
  return v >= 0 && g.values[v].is_constant && g.values[v].constant.dtype() == DType::kFloat32 &&
         (rank < 0 || static_cast<int>(g.values[v].constant.rank()) == rank);
}

bool is_conv(const ir::Node& n) { return is_op(n, "Conv") || (n.op_type == "FusedConv" && n.domain == "mminfer"); }

// Mirrors the conditions under which MatMul/FusedMatMul/Gemm pack constant weights.
bool quantizable(const ir::Graph& g, const ir::Node& n, Precision want) {
  if (n.removed || n.inputs.size() < 2 || n.outputs.size() != 1 || n.inputs[0] < 0) return false;
  if (g.values[n.inputs[0]].dtype != DType::kFloat32) return false;
  if (is_conv(n)) return want == Precision::kInt8 && constant_f32(g, n.inputs[1], 4);
  if (!constant_f32(g, n.inputs[1], 2)) return false;
  const Tensor& w = g.values[n.inputs[1]].constant;
  bool fused = n.op_type == "FusedMatMul" && n.domain == "mminfer";
  if (is_op(n, "MatMul") || fused) {
    if (fused && n.inputs.size() > 2 && n.inputs[2] >= 0 && !constant_f32(g, n.inputs[2], -1)) return false;
    return w.dim(0) >= 1 && w.dim(0) <= kMaxK && w.dim(1) >= 1;
  }
  if (is_op(n, "Gemm")) {
    if (n.attrs.get_int("transA", 0) != 0) return false;
    int64_t k = n.attrs.get_int("transB", 0) != 0 ? w.dim(1) : w.dim(0), cols = w.numel() / std::max<int64_t>(k, 1);
    if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
      if (!constant_f32(g, n.inputs[2], -1)) return false;
      const Tensor& c = g.values[n.inputs[2]].constant;
      if (c.rank() > 2 || (c.rank() == 2 && c.dim(0) != 1) || (c.numel() != cols && c.numel() != 1)) return false;
    }
    return k >= 1 && k <= kMaxK && cols >= 1;
  }
  return false;
}

}  // namespace

bool assign_precision(ir::Graph& g, const PassContext& ctx) {
  const PrecisionPolicy& policy = ctx.precision;
  if (!policy.any_below_fp32()) return false;
  std::vector<int> order = g.topological_order();
  std::vector<ir::ModalitySet> modalities = ir::node_modalities(g);
  // Each candidate's class: its single modality (kOther when no recognised input reaches it).
  std::vector<ir::ModalitySet> cls(g.nodes.size(), 0);
  for (int n : order) {
    auto m = ir::single_modality(modalities[n]);
    if (m && quantizable(g, g.nodes[n], policy.of(*m))) cls[n] = ir::modality_bit(*m);
  }

  std::vector<bool> keep(g.nodes.size(), false);
  if (policy.keep_edges_fp32) {
    // follows[n]: the classes of the candidates downstream of n (consumers walked backwards).
    std::vector<std::vector<int>> readers(g.values.size());
    for (int n : order)
      for (int in : g.nodes[n].inputs)
        if (in >= 0) readers[in].push_back(n);
    std::vector<ir::ModalitySet> follows(g.nodes.size(), 0);
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      for (int out : g.nodes[*it].outputs)
        if (out >= 0)
          for (int r : readers[out]) follows[*it] |= follows[r] | cls[r];
    }
    std::vector<int> first(kNumModalities, -1), last(kNumModalities, -1);
    for (int n : order) {
      if (!cls[n]) continue;
      if (!(follows[n] & cls[n])) {  // a projection
        keep[n] = true;
        continue;
      }
      int m = static_cast<int>(*ir::single_modality(cls[n]));
      if (first[m] < 0) first[m] = n;
      last[m] = n;
    }
    for (int m = 0; m < kNumModalities; ++m) {
      if (first[m] >= 0) keep[first[m]] = true;
      if (last[m] >= 0) keep[last[m]] = true;
    }
  }
  std::optional<std::regex> keep_re;
  if (!policy.keep_fp32.empty()) keep_re.emplace(policy.keep_fp32, std::regex::ECMAScript);

  bool changed = false;
  for (int n : order) {
    if (!cls[n] || keep[n]) continue;
    ir::Node& node = g.nodes[n];
    Precision want = policy.of(*ir::single_modality(cls[n]));
    if (want == Precision::kFp32 || (want == Precision::kBf16 && !ctx.native_bf16)) continue;
    if (keep_re && (std::regex_search(g.label(node), *keep_re) || std::regex_search(node.op_type, *keep_re))) continue;
    if (node.attrs.get_string("precision", "") == precision_name(want)) continue;
    node.attrs.set("precision", std::string(precision_name(want)));
    if (want == Precision::kInt8 && policy.int8_per_tensor) node.attrs.set("int8_activations", std::string("per_tensor"));
    changed = true;
  }
  return changed;
}

}  // namespace mminfer::passes
