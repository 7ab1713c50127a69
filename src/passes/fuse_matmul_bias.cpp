// MatMul(X, W) with constant 2-D W, then Add of a constant bias over the last axis, then an
// optional residual Add of another tensor, then an optional activation →
// mminfer::FusedMatMul, which applies them while the packed GEMM's output tile is still in
// registers: Y = act(X·W + bias + Z).
#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

std::optional<std::pair<std::string, std::vector<float>>> activation_of(const ir::Node& n) {
  if (n.removed || !n.domain.empty() || n.outputs.size() != 1) return std::nullopt;
  if (n.op_type == "Relu" || n.op_type == "Sigmoid" || n.op_type == "Tanh") return std::make_pair(n.op_type, std::vector<float>{});
  if (n.op_type == "Gelu")
    return std::make_pair(std::string(n.attrs.get_string("approximate", "none") == "tanh" ? "GeluTanh" : "Gelu"), std::vector<float>{});
  if (n.op_type == "LeakyRelu") return std::make_pair(std::string("LeakyRelu"), std::vector<float>{n.attrs.get_float("alpha", 0.01f)});
  return std::nullopt;
}

}  // namespace

bool fuse_matmul_bias(ir::Graph& g, const PassContext&) {
  bool changed = false;
  UseCounts uses(g);
  size_t count = g.nodes.size();
  for (size_t mi = 0; mi < count; ++mi) {
    const ir::Node& mm = g.nodes[mi];
    if (!is_op(mm, "MatMul")) continue;
    int x = mm.inputs[0], w = mm.inputs[1];
    if (g.values[x].dtype != DType::kFloat32 || !g.values[w].is_constant) continue;
    const Tensor& wt = g.values[w].constant;
    if (wt.dtype() != DType::kFloat32 || wt.rank() != 2) continue;
    int64_t n = wt.dim(1);
    int out = mm.outputs[0];
    int bias = ir::kNoValue;
    std::vector<int> replaced = {static_cast<int>(mi)};
    int r = uses.only_reader(out);
    if (r >= 0 && is_op(g.nodes[r], "Add")) {
      const ir::Node& add = g.nodes[r];
      int other = add.inputs[0] == out ? add.inputs[1] : add.inputs[0];
      const ir::Value& b = g.values[other];
      // Only a bias along the output features; anything else is a different kind of Add.
      if (b.is_constant && b.constant.dtype() == DType::kFloat32 && b.constant.numel() == n &&
          (b.constant.rank() == 1 ||
           (b.constant.dim(b.constant.rank() - 1) == n && known_rank(g, x) >= static_cast<int>(b.constant.rank())))) {
        bias = other;
        replaced.push_back(r);
        out = add.outputs[0];
        r = uses.only_reader(out);
      }
    }
    // A residual Add rides along: as the GEMM's sum post-op when it turns out to have the
    // product's shape at run time, as a broadcast add otherwise.
    int residual = ir::kNoValue;
    if (r >= 0 && is_op(g.nodes[r], "Add")) {
      const ir::Node& add = g.nodes[r];
      int other = add.inputs[0] == out ? add.inputs[1] : add.inputs[0];
      if (other != out && g.values[other].dtype == DType::kFloat32) {
        residual = other;
        replaced.push_back(r);
        out = add.outputs[0];
        r = uses.only_reader(out);
      }
    }
    std::optional<std::pair<std::string, std::vector<float>>> act;
    if (r >= 0 && g.nodes[r].inputs[0] == out) act = activation_of(g.nodes[r]);
    if (act) {
      replaced.push_back(r);
      out = g.nodes[r].outputs[0];
    } else if (auto silu = match_silu(g, uses, out)) {
      act = std::make_pair(std::string("Silu"), std::vector<float>{silu->alpha});
      replaced.insert(replaced.end(), silu->nodes.begin(), silu->nodes.end());
      out = silu->output;
    }
    if (bias < 0 && residual < 0 && !act) continue;
    ir::Node fused = mminfer_node("FusedMatMul", g.label(mm) + "/fused", {x, w}, {});
    if (bias >= 0) {
      // The kernel wants a 1-D bias; a [1, N] or [1, 1, N] constant is the same numbers.
      const Tensor& bt = g.values[bias].constant;
      if (bt.rank() != 1) {
        int nb = g.add_value(fresh_name(g, g.values[bias].name + "/1d"));
        const Tensor& src = g.values[bias].constant;
        make_constant(g.values[nb], Tensor::alias(src, DType::kFloat32, {n}, const_cast<void*>(src.raw())));
        bias = nb;
      }
      fused.inputs.push_back(bias);
    }
    if (residual >= 0) {
      fused.inputs.resize(3, ir::kNoValue);
      fused.inputs.push_back(residual);
    }
    fused.attrs.set("activation", act ? act->first : std::string());
    if (act) fused.attrs.set("activation_params", act->second);
    copy_precision_attrs(mm, fused);  // set by absorb_* or assign_precision
    fused.outputs = {out};
    replace_nodes(g, replaced, std::move(fused));
    uses = UseCounts(g);
    changed = true;
  }
  return changed;
}

}  // namespace mminfer::passes
