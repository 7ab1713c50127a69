// Matches, from each Softmax: MatMul(Q, Kᵀ) → [Mul|Div by scalars] → [Where(mask, ·, c) | Add mask]
// → Softmax(last axis) → MatMul(·, V), where K and V each lead back, through layout ops only
// (the Transpose of K, and Unsqueeze → Expand → Reshape when KV heads are shared by several query
// heads), to Concat(past input, new rows) on the sequence axis.
#include "passes/bind_kv_cache.h"

#include <algorithm>
#include <set>

#include "core/int8_rows.h"
#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

// The Concat that appends this step's rows to a past input, reached from `v` through layout ops.
struct CacheRead {
  int concat = -1;
  int past = -1, fresh = -1;  // the Concat's inputs
};

bool swaps_last_two(const ir::Node& n) {
  auto perm = ints_attr(n, "perm");
  return perm && *perm == std::vector<int64_t>{0, 1, 3, 2};
}

std::optional<CacheRead> walk_to_concat(const ir::Graph& g, int v, bool expect_transpose) {
  bool transposed = false;
  for (int hops = 0; hops < 8; ++hops) {
    int p = g.values[v].producer;
    if (p < 0) return std::nullopt;
    const ir::Node& n = g.nodes[p];
    if (is_op(n, "Concat")) {
      auto axis = int_attr(n, "axis", 0);
      if (!axis || (*axis != 2 && *axis != -2) || n.inputs.size() != 2 || transposed != expect_transpose) return std::nullopt;
      const ir::Value& past = g.values[n.inputs[0]];
      if (!past.is_graph_input || (past.has_shape && past.dims.size() != 4)) return std::nullopt;
      return CacheRead{p, n.inputs[0], n.inputs[1]};
    }
    if (is_op(n, "Transpose") && expect_transpose && !transposed && swaps_last_two(n)) {
      transposed = true;
    } else if (!is_op(n, "Unsqueeze") && !is_op(n, "Expand") && !is_op(n, "Reshape")) {
      return std::nullopt;
    }
    v = n.inputs[0];
  }
  return std::nullopt;
}

// One attention block in the cached form, found from its Softmax.
struct Block {
  std::vector<int> nodes;  // score MatMul, scalings, mask, Softmax, output MatMul
  int q = -1;
  CacheRead k, v;
  float scale = 1.f;
  bool masked = false;
  int out = -1;
};

std::optional<Block> match_block(const ir::Graph& g, const UseCounts& uses, int softmax) {
  const ir::Node& sm = g.nodes[softmax];
  auto axis = int_attr(sm, "axis", sm.opset >= 13 ? -1 : 1);
  if (!axis || (*axis != -1 && *axis != 3)) return std::nullopt;
  Block b;
  b.nodes.push_back(softmax);
  int x = sm.inputs[0];
  for (int hops = 0; hops < 6; ++hops) {
    if (uses.only_reader(x) < 0) return std::nullopt;
    int p = g.values[x].producer;
    if (p < 0) return std::nullopt;
    const ir::Node& n = g.nodes[p];
    if (is_op(n, "MatMul")) {
      b.nodes.push_back(p);
      b.q = n.inputs[0];
      auto k = walk_to_concat(g, n.inputs[1], true);
      if (!k) return std::nullopt;
      b.k = *k;
      break;
    }
    if (is_op(n, "Where") && n.inputs.size() == 3) {
      b.masked = true;
      x = n.inputs[1];
    } else if (is_op(n, "Add") && n.inputs.size() == 2) {
      // The scores are the operand made by the chain; the other is the mask.
      int a = g.values[n.inputs[0]].producer;
      bool first = a >= 0 && (is_op(g.nodes[a], "MatMul") || is_op(g.nodes[a], "Mul") || is_op(g.nodes[a], "Div"));
      x = first ? n.inputs[0] : n.inputs[1];
      b.masked = true;
    } else if ((is_op(n, "Mul") || is_op(n, "Div")) && n.inputs.size() == 2) {
      // The scalar is the second operand (either one for Mul); the scores are the other.
      bool second = scalar_constant(g, n.inputs[1]).has_value();
      if (!second && n.op_type == "Div") return std::nullopt;
      auto s = scalar_constant(g, n.inputs[second ? 1 : 0]);
      if (!s || *s == 0.f) return std::nullopt;
      b.scale *= n.op_type == "Mul" ? *s : 1.f / *s;
      x = n.inputs[second ? 0 : 1];
    } else {
      return std::nullopt;
    }
    b.nodes.push_back(p);
  }
  if (b.q < 0) return std::nullopt;
  int pv = uses.only_reader(sm.outputs[0]);
  if (pv < 0 || !is_op(g.nodes[pv], "MatMul") || g.nodes[pv].inputs[0] != sm.outputs[0]) return std::nullopt;
  auto v = walk_to_concat(g, g.nodes[pv].inputs[1], false);
  if (!v || v->concat == b.k.concat || v->past == b.k.past) return std::nullopt;
  b.v = *v;
  b.nodes.push_back(pv);
  b.out = g.nodes[pv].outputs[0];
  return b;
}

// Graph outputs that are a matched Concat's result, directly or through Identity.
bool is_present_output(const ir::Graph& g, int value, const std::set<int>& concats) {
  for (int hops = 0; hops < 4 && value >= 0; ++hops) {
    int p = g.values[value].producer;
    if (p < 0) return false;
    if (concats.count(p)) return true;
    if (!is_op(g.nodes[p], "Identity")) return false;
    value = g.nodes[p].inputs[0];
  }
  return false;
}

int add_input(ir::Graph& g, const char* name, DType dtype, std::vector<int64_t> dims) {
  int v = g.find_value(name);
  if (v >= 0) return v;
  v = g.add_value(name);
  ir::Value& x = g.values[v];
  x.dtype = dtype;
  x.has_shape = true;
  x.dims = std::move(dims);
  x.symbols.assign(x.dims.size(), x.dims.empty() ? "" : "batch_size");
  x.is_graph_input = true;
  g.inputs.push_back(v);
  return v;
}

// GroupQueryAttention with its past inputs straight from the graph: told to append in place; its
// presents, and the mask arithmetic behind seqlens_k and total_sequence_length, go away.
void bind_group_query_attention(ir::Graph& g, KvCacheBinding& binding, std::set<int>& pasts, std::set<int>& presents) {
  for (auto& n : g.nodes) {
    if (n.removed || n.domain != "com.microsoft" || n.op_type != "GroupQueryAttention" || n.inputs.size() < 7) continue;
    int pk = n.inputs[3], pv = n.inputs[4];
    if (pk < 0 || pv < 0 || !g.values[pk].is_graph_input || !g.values[pv].is_graph_input) continue;
    n.attrs.set("mminfer_cache_in_place", int64_t{1});
    n.inputs[5] = add_input(g, KvCacheBinding::kSeqlensInput, DType::kInt32, {-1});
    n.inputs[6] = add_input(g, KvCacheBinding::kTotalInput, DType::kInt32, {});
    // After the inputs the op defines (up to head_sink, 11): the block table.
    if (n.inputs.size() < 12) n.inputs.resize(12, ir::kNoValue);
    n.attrs.set("mminfer_block_table_input", static_cast<int64_t>(n.inputs.size()));
    n.inputs.push_back(add_input(g, KvCacheBinding::kBlockTableInput, DType::kInt32, {-1, -1}));
    for (size_t o = 1; o < n.outputs.size() && o < 3; ++o)
      if (n.outputs[o] >= 0) presents.insert(n.outputs[o]), n.outputs[o] = ir::kNoValue;
    pasts.insert({pk, pv});
    binding.pairs.push_back({g.values[pk].name, g.values[pv].name});
  }
}

}  // namespace

std::optional<KvCacheBinding> bind_kv_cache(ir::Graph& original, std::string* why, DType cache_dtype) {
  ir::Graph g = original;  // rewritten on a copy: a model that does not match is left as it was
  g.relink();
  UseCounts uses(g);
  std::vector<Block> blocks;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!g.nodes[i].removed && is_op(g.nodes[i], "Softmax"))
      if (auto b = match_block(g, uses, static_cast<int>(i))) blocks.push_back(*b);
  KvCacheBinding binding;
  std::set<int> concats, pasts, gqa_presents;
  bind_group_query_attention(g, binding, pasts, gqa_presents);
  if (blocks.empty() && binding.pairs.empty()) {
    *why = "no attention reads a past input through Concat on the sequence axis or GroupQueryAttention";
    return std::nullopt;
  }
  int lengths = blocks.empty() ? -1 : add_input(g, KvCacheBinding::kLengthsInput, DType::kInt64, {-1});
  int table = blocks.empty() ? -1 : add_input(g, KvCacheBinding::kBlockTableInput, DType::kInt32, {-1, -1});
  for (const Block& b : blocks) {
    ir::Node fused = mminfer_node("CachedAttention", g.label(g.nodes[b.nodes.back()]) + "/cached_attention",
                                  {b.q, b.k.fresh, b.v.fresh, b.k.past, b.v.past, lengths, table}, {b.out});
    fused.attrs.set("scale", b.scale);
    fused.attrs.set("causal", int64_t{b.masked ? 1 : 0});
    replace_nodes(g, b.nodes, std::move(fused));
    concats.insert({b.k.concat, b.v.concat});
    pasts.insert({b.k.past, b.v.past});
    binding.pairs.push_back({g.values[b.k.past].name, g.values[b.v.past].name});
  }

  for (int p : pasts) {
    ir::Value& past = g.values[p];
    if (past.dtype != DType::kFloat32) continue;
    past.dtype = cache_dtype;
    // An int8 cache's rows carry their scale after the codes (core/int8_rows.h).
    if (cache_dtype == DType::kInt8 && past.has_shape && past.dims.size() == 4 && past.dims[3] > 0)
      past.dims[3] = int8_rows::bytes(past.dims[3]);
  }
  // The presents are the cache now: they stop being outputs.
  std::vector<int> kept;
  for (int o : g.outputs) {
    if (gqa_presents.count(o) || is_present_output(g, o, concats)) g.values[o].is_graph_output = false;
    else kept.push_back(o);
  }
  g.outputs = kept;

  // Shape(past) reads the logical shape, which the loop feeds: the Shape's result becomes an input.
  for (auto& n : g.nodes) {
    if (n.removed || !is_op(n, "Shape") || !pasts.count(n.inputs[0])) continue;
    auto start = int_attr(n, "start", 0), end = int_attr(n, "end", 4);
    if (!start || !end) continue;
    int64_t s = std::clamp<int64_t>(*start < 0 ? *start + 4 : *start, 0, 4);
    int64_t e = std::clamp<int64_t>(*end < 0 ? *end + 4 : *end, 0, 4);
    ir::Value& out = g.values[n.outputs[0]];
    out.is_graph_input = true;
    out.dtype = DType::kInt64;
    out.has_shape = true;
    out.dims = {std::max<int64_t>(e - s, 0)};
    out.symbols = {""};
    g.inputs.push_back(n.outputs[0]);
    binding.shape_feeds.push_back({out.name, g.values[n.inputs[0]].name, s, std::max(s, e)});
    n.removed = true;
  }
  g.relink();
  eliminate_dead_nodes(g, PassContext{});

  // Every reader of a past input must be a fused node now, and no Concat of a past may be left.
  for (const auto& n : g.nodes) {
    if (n.removed) continue;
    bool fused = (n.domain == "mminfer" && n.op_type == "CachedAttention") ||
                 (n.op_type == "GroupQueryAttention" && n.attrs.get_int("mminfer_cache_in_place", 0) == 1);
    for (int in : n.inputs) {
      if (in < 0 || !pasts.count(in) || fused) continue;
      *why = "'" + g.values[in].name + "' is also read by " + n.op_type + " '" + g.label(n) + "'";
      return std::nullopt;
    }
    if (is_op(n, "Concat") && !n.inputs.empty() && n.inputs[0] >= 0 && g.values[n.inputs[0]].is_graph_input &&
        std::any_of(n.outputs.begin(), n.outputs.end(), [&](int o) { return o >= 0 && g.values[o].is_graph_output; })) {
      *why = "the past input '" + g.values[n.inputs[0]].name + "' is appended to outside a recognised attention block";
      return std::nullopt;
    }
  }

  drop_unread_inputs(g);  // attention_mask, when it only built the mask
  std::erase_if(binding.shape_feeds, [&](const PastShapeFeed& f) {
    int v = g.find_value(f.input);
    return !g.values[v].is_graph_input;
  });
  original = std::move(g);
  return binding;
}

}  // namespace mminfer::passes
