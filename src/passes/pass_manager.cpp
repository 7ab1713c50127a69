#include <algorithm>

#include "passes/pass.h"

namespace mminfer::passes {

size_t count_nodes(const ir::Graph& g) {
  size_t n = 0;
  for (auto& node : g.nodes) n += !node.removed;
  return n;
}

void replace_uses(ir::Graph& g, int from, int to) {
  for (auto& node : g.nodes) {
    if (node.removed) continue;
    for (int& in : node.inputs)
      if (in == from) in = to;
  }
}

PassReport optimize(ir::Graph& g, const PassContext& ctx) {
  static const std::vector<Pass> kPasses = {
      {"absorb_fp16_weights", 2, absorb_fp16_weights},  // before fold_constants hides the halves
      {"expand_qlinear_ops", 2, expand_qlinear_ops},    // into QDQ, before fold_constants and absorb_qdq
      {"remove_identity", 1, remove_identity},
      {"cancel_transpose_reshape", 1, cancel_transpose_reshape},
      {"fold_shape_arithmetic", 1, fold_shape_arithmetic},  // before fold_constants, which folds what follows
      {"fold_constants", 1, fold_constants},
      {"eliminate_dead_nodes", 1, eliminate_dead_nodes},
      {"select_rows_early", 2, select_rows_early},
      {"absorb_dynamic_quantization", 2, absorb_dynamic_quantization},  // before fuse_matmul_bias
      {"absorb_qdq", 2, absorb_qdq},  // after fold_constants (weights), before the fusions
      {"fold_conv_batchnorm", 2, fold_conv_batchnorm},
      {"fold_conv_affine", 2, fold_conv_affine},
      {"fuse_layer_norm", 2, fuse_layer_norm},
      {"fuse_rms_norm", 2, fuse_rms_norm},
      {"fuse_rotate_half", 2, fuse_rotate_half},
      {"fuse_gelu", 2, fuse_gelu},
      {"fuse_attention", 2, fuse_attention},
      {"absorb_attention_transposes", 2, absorb_attention_transposes},
      {"fuse_matmul_bias", 2, fuse_matmul_bias},
      {"fuse_swiglu", 2, fuse_swiglu},  // the SiLUs no GEMM took as its epilogue
      {"pack_qkv_projections", 2, pack_qkv_projections},
      {"pack_sibling_matmuls", 2, pack_sibling_matmuls},  // after pack_qkv_projections takes its groups
      {"fuse_conv_activation", 2, fuse_conv_activation},
  };
  PassReport report;
  report.nodes_before = count_nodes(g);
  // Token merging is the user's choice and matches the graph as exported, before any fusion.
  if (ctx.merge_tokens > 0 && merge_tokens(g, ctx)) report.applied.push_back("merge_tokens");
  for (int round = 0; round < 8; ++round) {
    bool changed = false;
    for (const Pass& p : kPasses) {
      if (ctx.opt_level < p.min_level) continue;
      g.relink();  // passes read Value::producer
      if (p.run(g, ctx)) {
        changed = true;
        if (std::find(report.applied.begin(), report.applied.end(), p.name) == report.applied.end())
          report.applied.push_back(p.name);
      }
    }
    if (!changed) break;
  }
  // Layout choices hide ops from the fusion patterns, so they run once the graph is final.
  static const std::vector<Pass> kLayoutPasses = {
      {"conv_channels_last", 2, conv_channels_last},
  };
  for (const Pass& p : kLayoutPasses) {
    if (ctx.opt_level < p.min_level) continue;
    g.relink();
    if (p.run(g, ctx)) report.applied.push_back(p.name);
  }
  // Precision is the user's choice, not an optimisation level's: it applies at every level, to
  // the nodes the fusions have left.
  if (ctx.precision.any_below_fp32()) {
    g.relink();
    if (assign_precision(g, ctx)) report.applied.push_back("assign_precision");
  }
  // Weight layouts for one instruction set, once the products and their precision are final.
  if (ctx.opt_level >= 2) {
    g.relink();
    if (tile_nbits_weights(g, ctx)) report.applied.push_back("tile_nbits_weights");
  }
  // Drop removed nodes so later stages see a compact list.
  g.nodes.erase(std::remove_if(g.nodes.begin(), g.nodes.end(), [](const ir::Node& n) { return n.removed; }),
                g.nodes.end());
  g.relink();
  report.nodes_after = count_nodes(g);
  return report;
}

}  // namespace mminfer::passes
