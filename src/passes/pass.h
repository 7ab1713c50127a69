// Graph passes: each rewrites the IR in place and says whether it changed anything.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "mminfer/precision.h"

namespace mminfer::passes {

// Computes a node's outputs from constant inputs, or returns nothing when the node's kernel may
// not be computed ahead (random generators, control flow, fused ops; no kernel at all). The
// runtime supplies it, so a pass never touches a kernel or the registry itself.
using NodeEvaluator = std::function<std::vector<Tensor>(const ir::Graph&, const ir::Node&)>;

struct PassContext {
  int opt_level = 1;
  NodeEvaluator evaluate;
  size_t max_folded_bytes = size_t(64) << 20;  // larger constant results stay computed at run time
  PrecisionPolicy precision;                    // which nodes assign_precision marks
  bool native_bf16 = false;                     // the CPU multiplies bfloat16 natively
  bool tile_nbits = false;                      // the CPU runs MatMulNBits weights tiled (tile_nbits_weights)
  int merge_tokens = 0;                         // tokens merged per ViT block (merge_tokens)
};

struct Pass {
  const char* name;
  int min_level;  // runs when PassContext::opt_level >= min_level
  std::function<bool(ir::Graph&, const PassContext&)> run;
};

// Passes by name, each in its own file.
bool remove_identity(ir::Graph& g, const PassContext& ctx);
bool cancel_transpose_reshape(ir::Graph& g, const PassContext& ctx);
bool fold_shape_arithmetic(ir::Graph& g, const PassContext& ctx);
bool fold_constants(ir::Graph& g, const PassContext& ctx);
bool eliminate_dead_nodes(ir::Graph& g, const PassContext& ctx);
bool fuse_attention(ir::Graph& g, const PassContext& ctx);
bool absorb_attention_transposes(ir::Graph& g, const PassContext& ctx);
bool pack_qkv_projections(ir::Graph& g, const PassContext& ctx);
bool pack_sibling_matmuls(ir::Graph& g, const PassContext& ctx);
bool tile_nbits_weights(ir::Graph& g, const PassContext& ctx);
bool fold_conv_batchnorm(ir::Graph& g, const PassContext& ctx);
bool fold_conv_affine(ir::Graph& g, const PassContext& ctx);
bool fuse_conv_activation(ir::Graph& g, const PassContext& ctx);
bool fuse_matmul_bias(ir::Graph& g, const PassContext& ctx);
bool fuse_gelu(ir::Graph& g, const PassContext& ctx);
bool fuse_layer_norm(ir::Graph& g, const PassContext& ctx);
bool fuse_rms_norm(ir::Graph& g, const PassContext& ctx);
bool fuse_rotate_half(ir::Graph& g, const PassContext& ctx);
bool fuse_swiglu(ir::Graph& g, const PassContext& ctx);
bool conv_channels_last(ir::Graph& g, const PassContext& ctx);
bool assign_precision(ir::Graph& g, const PassContext& ctx);
bool absorb_dynamic_quantization(ir::Graph& g, const PassContext& ctx);
bool absorb_qdq(ir::Graph& g, const PassContext& ctx);
bool absorb_fp16_weights(ir::Graph& g, const PassContext& ctx);
bool expand_qlinear_ops(ir::Graph& g, const PassContext& ctx);
bool select_rows_early(ir::Graph& g, const PassContext& ctx);
bool merge_tokens(ir::Graph& g, const PassContext& ctx);

struct PassReport {
  size_t nodes_before = 0, nodes_after = 0;
  std::vector<std::string> applied;  // names of passes that changed the graph
};

// Runs the passes of the given level to a fixed point (bounded number of rounds).
PassReport optimize(ir::Graph& g, const PassContext& ctx);

// Live node count.
size_t count_nodes(const ir::Graph& g);
// Replaces every read of value `from` by value `to` in live nodes.
void replace_uses(ir::Graph& g, int from, int to);

}  // namespace mminfer::passes
