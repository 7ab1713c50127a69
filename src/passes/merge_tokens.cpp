// Token merging for ViT-style encoders (PassContext::merge_tokens = r): after each block's
// attention residual, an mminfer::TokenMerge node merges the r most similar token pairs (by the
// cosine of the block's normalized attention input), so the block's MLP and every later block
// run on fewer tokens. Later blocks add log(size) to their attention scores, so a merged token
// draws the attention of all the tokens it stands for. Runs once on the graph as loaded, before
// the fusions.
//
// Only graphs whose every Softmax is such a block's attention, unmasked, are merged (a vision
// tower: a text tower's masks and a decoder's positions depend on the token count). Token 0 (the
// class token) never merges; the others keep their order, so r = 0 changes nothing. The graph's
// per-token outputs shrink with the tokens; a pooled output (the class token's) keeps its shape.
#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

struct Block {
  int softmax = -1;
  int metric = -1;    // the attention's input [B, T, D] (what q, k and v are projected from)
  int residual = -1;  // the attention residual Add's output: what TokenMerge replaces
};

int producer(const ir::Graph& g, int v) { return v >= 0 ? g.values[v].producer : -1; }

bool scaling(const ir::Graph& g, const ir::Node& n, int* data) {
  if ((!is_op(n, "Mul") && !is_op(n, "Div")) || n.inputs.size() != 2) return false;
  if (scalar_constant(g, n.inputs[1])) return *data = n.inputs[0], true;
  if (is_op(n, "Mul") && scalar_constant(g, n.inputs[0])) return *data = n.inputs[1], true;
  return false;
}

// Back from the keys the scores read, through Transposes, scaling, the head-split Reshape and the
// key projection (MatMul, bias), to the block's attention input: the tokens' similarity metric.
// (The keys themselves would add a reader to the key projection and keep it out of the packed
// Q/K/V GEMM; the normalized tokens they are made from cost nothing extra.)
int attention_input(const ir::Graph& g, int v) {
  bool split = false;
  for (int hops = 0; hops < 10; ++hops) {
    int p = producer(g, v);
    if (p < 0) return -1;
    const ir::Node& n = g.nodes[p];
    int data = -1;
    if (is_op(n, "Transpose") && !split) v = n.inputs[0];
    else if (scaling(g, n, &data) && !split) v = data;
    else if (is_op(n, "Reshape") && !split) split = true, v = n.inputs[0];
    else if (is_op(n, "Add") && split && n.inputs.size() == 2) {
      int bias = g.values[n.inputs[0]].is_constant ? 0 : g.values[n.inputs[1]].is_constant ? 1 : -1;
      if (bias < 0) return -1;
      v = n.inputs[1 - bias];
    } else if (is_op(n, "MatMul") && split && g.values[n.inputs[1]].is_constant) {
      return known_rank(g, n.inputs[0]) == 3 ? n.inputs[0] : -1;
    } else {
      return -1;
    }
  }
  return -1;
}

// The block around one Softmax, or softmax -1 when it is not an unmasked ViT attention.
Block match_block(const ir::Graph& g, const UseCounts& uses, int sm) {
  Block b;
  const ir::Node& s = g.nodes[sm];
  if (s.inputs.empty() || s.outputs.empty()) return b;
  int v = s.inputs[0], scores = -1;
  for (int hops = 0; hops < 3 && scores < 0; ++hops) {
    int p = producer(g, v);
    if (p < 0) return b;
    int data = -1;
    if (is_op(g.nodes[p], "MatMul")) scores = p;
    else if (scaling(g, g.nodes[p], &data)) v = data;
    else return b;  // a mask, or something else
  }
  if (scores < 0) return b;
  b.metric = attention_input(g, g.nodes[scores].inputs[1]);
  if (b.metric < 0) return b;
  int pv = uses.only_reader(s.outputs[0]);
  if (pv < 0 || !is_op(g.nodes[pv], "MatMul")) return b;
  // Forward: merge the heads, the output projection (and bias), the residual Add.
  int cur = g.nodes[pv].outputs[0];
  bool projected = false;
  for (int hops = 0; hops < 8; ++hops) {
    int r = uses.only_reader(cur);
    if (r < 0) return b;
    const ir::Node& n = g.nodes[r];
    if (is_op(n, "Transpose") || is_op(n, "Reshape")) {
      cur = n.outputs[0];
    } else if (is_op(n, "MatMul") && !projected && n.inputs[0] == cur && g.values[n.inputs[1]].is_constant) {
      projected = true;
      cur = n.outputs[0];
    } else if (is_op(n, "Add") && projected) {
      int other = other_input(n, cur);
      if (other < 0) return b;
      if (g.values[other].is_constant) {  // the projection's bias
        cur = n.outputs[0];
        continue;
      }
      if (known_rank(g, n.outputs[0]) != 3) return b;
      b.residual = n.outputs[0];
      b.softmax = sm;
      return b;
    } else {
      return b;
    }
  }
  return b;
}

void shaped(ir::Graph& g, int v, std::vector<int64_t> dims) {
  ir::Value& value = g.values[v];
  value.has_shape = !dims.empty();
  value.symbols.assign(dims.size(), "");
  value.dims = std::move(dims);
}

// Shapes recorded in the file hold the token count before merging. Downstream of merge k, the
// token axis becomes a symbol of its own, "mminfer_tokens_k" (each merge's count differs): no
// pass freezes the old count into a Reshape target, and passes that compare axes still see
// which ones agree. Dimensions that only happen to equal the count lose their size, no more.
void mark_token_count(ir::Graph& g, int from, int64_t tokens, int k) {
  const std::string symbol = "mminfer_tokens_" + std::to_string(k);
  auto is_token_axis = [&](const ir::Value& v, size_t i) {
    return (tokens > 0 && v.dims[i] == tokens) ||
           (v.dims[i] < 0 && i < v.symbols.size() && v.symbols[i].rfind("mminfer_tokens_", 0) == 0);
  };
  std::vector<bool> reached(g.values.size(), false);
  reached[static_cast<size_t>(from)] = true;
  auto mark = [&](int v) {
    ir::Value& value = g.values[v];
    value.symbols.resize(value.dims.size());
    for (size_t i = 0; i < value.dims.size(); ++i)
      if (is_token_axis(value, i)) value.dims[i] = -1, value.symbols[i] = symbol;
  };
  mark(from);
  for (int i : g.topological_order()) {
    const ir::Node& n = g.nodes[i];
    if (n.removed) continue;
    bool in = false;
    for (int v : n.inputs) in = in || (v >= 0 && reached[static_cast<size_t>(v)]);
    if (!in) continue;
    for (int v : n.outputs) {
      if (v < 0) continue;
      reached[static_cast<size_t>(v)] = true;
      mark(v);
    }
  }
}

}  // namespace

bool merge_tokens(ir::Graph& g, const PassContext& ctx) {
  if (ctx.merge_tokens <= 0) return false;
  g.relink();
  UseCounts uses(g);
  std::vector<Block> blocks;
  for (int i : g.topological_order()) {
    if (g.nodes[i].removed || !is_op(g.nodes[i], "Softmax")) continue;
    Block b = match_block(g, uses, i);
    if (b.softmax < 0) return false;  // not a plain vision tower: leave the graph whole
    blocks.push_back(b);
  }
  if (blocks.empty()) return false;
  const ir::Value& first = g.values[blocks.front().residual];
  const int64_t tokens = first.has_shape && first.dims.size() == 3 ? first.dims[1] : -1;
  int log_sizes = -1, sizes = -1;
  std::vector<int> merged_outputs;
  for (size_t k = 0; k < blocks.size(); ++k) {
    const Block& b = blocks[k];
    if (log_sizes >= 0) {  // proportional attention: scores + log(size of each key token)
      ir::Node& sm = g.nodes[b.softmax];
      int biased = g.add_value(fresh_name(g, g.values[sm.inputs[0]].name + "_by_size"));
      g.values[biased].dtype = DType::kFloat32;
      shaped(g, biased, g.values[sm.inputs[0]].dims);
      ir::Node add = default_node(g, "Add", g.label(sm) + "/size_bias", {sm.inputs[0], log_sizes}, biased);
      g.nodes[b.softmax].inputs[0] = biased;
      g.nodes.push_back(std::move(add));
    }
    const std::string base = g.values[b.residual].name;
    int merged = g.add_value(fresh_name(g, base + "_merged"));
    int new_sizes = g.add_value(fresh_name(g, base + "_token_sizes"));
    int new_log = g.add_value(fresh_name(g, base + "_token_log_sizes"));
    for (int v : {merged, new_sizes, new_log}) g.values[v].dtype = DType::kFloat32;
    shaped(g, merged, g.values[b.residual].dims);
    shaped(g, new_sizes, {-1, tokens});
    shaped(g, new_log, {-1, 1, 1, tokens});  // the rank lets fuse_attention take it as the mask
    for (ir::Node& n : g.nodes)
      if (!n.removed)
        for (int& in : n.inputs)
          if (in == b.residual) in = merged;
    std::vector<int> inputs = {b.residual, b.metric};
    if (sizes >= 0) inputs.push_back(sizes);
    ir::Node tm = mminfer_node("TokenMerge", base + "/token_merge", inputs, {merged, new_sizes, new_log});
    tm.attrs.set("r", static_cast<int64_t>(ctx.merge_tokens));
    tm.attrs.set("protect_first", static_cast<int64_t>(1));
    g.nodes.push_back(std::move(tm));
    sizes = new_sizes;
    log_sizes = new_log;
    merged_outputs.push_back(merged);
  }
  g.relink();
  for (size_t k = 0; k < merged_outputs.size(); ++k) mark_token_count(g, merged_outputs[k], tokens, static_cast<int>(k));
  g.relink();
  return true;
}

}  // namespace mminfer::passes
