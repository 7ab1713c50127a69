#include "onnx/transformer_blocks.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "onnx/proto_edit.h"

namespace mminfer::onnx_io {

namespace {

constexpr int kGraphOutput = -1;
constexpr int64_t kComputed = INT64_MIN;  // a shape element known only at run time

int64_t numel(const onnx::TensorProto& t) {
  int64_t n = 1;
  for (int64_t d : t.dims()) n *= d;
  return n;
}

// Integer elements of a small constant (int64 or int32, raw or typed).
std::vector<int64_t> int_values(const onnx::TensorProto& t) {
  std::vector<int64_t> out;
  const int64_t n = numel(t);
  if (t.data_type() == onnx::TensorProto::INT64) {
    if (!t.raw_data().empty()) {
      out.resize(static_cast<size_t>(n));
      if (t.raw_data().size() == out.size() * sizeof(int64_t)) std::memcpy(out.data(), t.raw_data().data(), t.raw_data().size());
      else out.clear();
    } else {
      out.assign(t.int64_data().begin(), t.int64_data().end());
    }
  } else if (t.data_type() == onnx::TensorProto::INT32) {
    if (!t.raw_data().empty()) {
      std::vector<int32_t> v(static_cast<size_t>(n));
      if (t.raw_data().size() == v.size() * sizeof(int32_t)) std::memcpy(v.data(), t.raw_data().data(), t.raw_data().size());
      else v.clear();
      out.assign(v.begin(), v.end());
    } else {
      out.assign(t.int32_data().begin(), t.int32_data().end());
    }
  }
  if (static_cast<int64_t>(out.size()) != n) out.clear();
  return out;
}

const std::set<std::string>& elementwise_ops() {
  static const std::set<std::string> ops = {"Mul",  "Add",     "Sub",       "Div",     "Pow",         "Sigmoid",
                                            "Tanh", "Erf",     "Relu",      "LeakyRelu", "Gelu",      "Elu",
                                            "Selu", "Softplus", "HardSigmoid", "HardSwish", "Sqrt",   "Exp",
                                            "Neg",  "Abs",     "Clip",      "Mish"};
  return ops;
}

// Who writes and who reads each value of the main graph.
class GraphIndex {
 public:
  explicit GraphIndex(const onnx::GraphProto& g) : g_(g), inits_(initializers(g)) {
    for (int i = 0; i < g.node_size(); ++i) {
      for (const auto& in : g.node(i).input()) readers_[in].push_back(i);
      for (const auto& out : g.node(i).output()) producer_[out] = i;
    }
    for (const auto& o : g.output()) readers_[o.name()].push_back(kGraphOutput);
  }

  const onnx::NodeProto& node(int i) const { return g_.node(i); }
  bool is(int i, const char* op) const {
    return i >= 0 && g_.node(i).op_type() == op && is_default_domain(g_.node(i).domain());
  }
  int producer(const std::string& v) const {
    auto it = producer_.find(v);
    return it == producer_.end() ? -1 : it->second;
  }
  const std::vector<int>& readers(const std::string& v) const {
    static const std::vector<int> none;
    auto it = readers_.find(v);
    return it == readers_.end() ? none : it->second;
  }
  // The one node that reads v, or -1 (none, several, or a graph output).
  int only_reader(const std::string& v) const {
    const auto& r = readers(v);
    return r.size() == 1 ? r[0] : -1;
  }
  // The one reader of v besides Shape nodes that only look at its leading (batch and sequence)
  // dimensions, which a narrower last dimension leaves alone; -1 if there is not exactly one.
  int sole_reader(const std::string& v) const {
    int found = -1;
    for (int r : readers(v)) {
      if (r != kGraphOutput && leading_shape(r)) continue;
      if (found >= 0 || r == kGraphOutput) return -1;
      found = r;
    }
    return found;
  }
  bool leading_shape(int n) const {
    if (!is(n, "Shape")) return false;
    for (const auto& a : node(n).attribute())
      if (a.name() == "end") return a.i() == -1 || a.i() == 1 || a.i() == 2;
      else if (a.name() == "start" && a.i() != 0) return false;
    for (int r : readers(node(n).output(0))) {
      if (!is(r, "Gather") || node(r).input(0) != node(n).output(0)) return false;
      const onnx::TensorProto* index = constant(node(r).input(1));
      std::vector<int64_t> v = index ? int_values(*index) : std::vector<int64_t>{};
      if (v.size() != 1 || (v[0] != 0 && v[0] != 1 && v[0] != -2 && v[0] != -3)) return false;
    }
    return true;
  }
  // The constant behind Identity nodes, or null.
  const onnx::TensorProto* constant(std::string name, std::string* resolved = nullptr) const {
    for (int hops = 0; hops < 8; ++hops) {
      auto it = inits_.find(name);
      if (it != inits_.end()) {
        if (resolved) *resolved = name;
        return it->second;
      }
      int p = producer(name);
      if (p < 0 || !is(p, "Identity")) return nullptr;
      name = node(p).input(0);
    }
    return nullptr;
  }
  bool scalar_constant(const std::string& v) const {
    const onnx::TensorProto* t = constant(v);
    return t && numel(*t) == 1;
  }
  // A Mul or Div of `data` by a scalar constant: the data input's slot, else -1.
  int scaling_data_slot(int n) const {
    if (!is(n, "Mul") && !is(n, "Div")) return -1;
    const auto& nd = node(n);
    if (nd.input_size() != 2) return -1;
    if (scalar_constant(nd.input(1))) return 0;
    if (is(n, "Mul") && scalar_constant(nd.input(0))) return 1;
    return -1;
  }
  // MatMul `n` by a constant float [K, N] weight read as its second input.
  bool weight_matmul(int n, Projection* p) const {
    if (!is(n, "MatMul") || node(n).input_size() != 2) return false;
    std::string name;
    const onnx::TensorProto* w = constant(node(n).input(1), &name);
    if (!w || w->data_type() != onnx::TensorProto::FLOAT || w->dims_size() != 2) return false;
    p->matmul = n;
    p->weight = name;
    p->rows = w->dims(0);
    p->cols = w->dims(1);
    p->output = node(n).output(0);
    return true;
  }
  // After a projection's MatMul, the Add of a constant [N] bias read only there.
  void take_bias(Projection* p) const {
    int a = only_reader(p->output);
    if (!is(a, "Add") || node(a).input_size() != 2) return;
    for (int slot = 0; slot < 2; ++slot) {
      if (node(a).input(1 - slot) != p->output) continue;
      std::string name;
      const onnx::TensorProto* b = constant(node(a).input(slot), &name);
      if (!b || b->data_type() != onnx::TensorProto::FLOAT || numel(*b) != p->cols || b->dims_size() < 1 ||
          b->dims(b->dims_size() - 1) != p->cols)
        return;
      p->bias_add = a;
      p->bias_slot = slot;
      p->bias = name;
      p->output = node(a).output(0);
      return;
    }
  }

 private:
  const onnx::GraphProto& g_;
  std::map<std::string, const onnx::TensorProto*> inits_;
  std::map<std::string, int> producer_;
  std::map<std::string, std::vector<int>> readers_;
};

// Where element `element` of a Reshape's target shape lives as a constant, with its value.
struct ShapeSource {
  bool found = false;
  ShapeElement at;
  int64_t value = 0;
};

ShapeSource shape_element(const GraphIndex& ix, int reshape, int64_t element, int64_t rank) {
  ShapeSource s;
  const std::string& shape = ix.node(reshape).input(1);
  std::string name;
  if (const onnx::TensorProto* t = ix.constant(shape, &name)) {
    auto v = int_values(*t);
    if (static_cast<int64_t>(v.size()) != rank) return s;
    s.found = true;
    s.at = {reshape, 1, name, element, 1, false};
    s.value = v[static_cast<size_t>(element)];
    return s;
  }
  // torch builds dynamic shapes as Concat(Unsqueeze(Gather(Shape(x))), ..., constant pieces).
  int c = ix.producer(shape);
  if (!ix.is(c, "Concat")) return s;
  int64_t offset = 0;
  const auto& cn = ix.node(c);
  for (int slot = 0; slot < cn.input_size(); ++slot) {
    std::string piece;
    const onnx::TensorProto* t = ix.constant(cn.input(slot), &piece);
    std::vector<int64_t> v = t ? int_values(*t) : std::vector<int64_t>{};
    const int64_t len = t ? static_cast<int64_t>(v.size()) : 1;  // a computed piece: one unsqueezed scalar
    if (t && v.empty() && numel(*t) != 0) return s;
    if (element < offset + len) {
      s.found = true;
      s.at = {c, slot, t ? piece : "", element - offset, 1, t == nullptr};
      // A computed piece (torch's x.shape[-1]) is replaced whole by a constant of the new value.
      s.value = t ? v[static_cast<size_t>(element - offset)] : kComputed;
      return s;
    }
    offset += len;
  }
  return s;
}

// Axis labels after Transposes, starting from `labels`.
std::vector<int64_t> apply_transposes(const GraphIndex& ix, std::vector<int64_t> labels, const std::vector<int>& transposes) {
  for (int t : transposes) {
    std::vector<int64_t> perm;
    for (const auto& a : ix.node(t).attribute())
      if (a.name() == "perm") perm.assign(a.ints().begin(), a.ints().end());
    if (perm.size() != labels.size()) return {};
    std::vector<int64_t> next(labels.size());
    for (size_t i = 0; i < perm.size(); ++i) {
      if (perm[i] < 0 || perm[i] >= static_cast<int64_t>(labels.size())) return {};
      next[i] = labels[static_cast<size_t>(perm[i])];
    }
    labels = next;
  }
  return labels;
}

// One side of the scores (q, k) or the values: back from what the attention MatMul reads,
// through Transposes, scalar scaling and the one Reshape that splits heads, to the projection.
struct HeadSplit {
  Projection proj;
  int reshape = -1;
  std::vector<int> transposes;  // in graph order
  std::string error;
};

HeadSplit follow_split(const GraphIndex& ix, std::string v) {
  HeadSplit out;
  std::vector<int> back;
  for (int hops = 0; hops < 12; ++hops) {
    int p = ix.producer(v);
    if (p < 0) return out.error = "a head split without a projection", out;
    if (ix.sole_reader(v) < 0) return out.error = "a head split read twice", out;
    if (ix.is(p, "Transpose")) {
      if (out.reshape >= 0) return out.error = "a Transpose before the head split", out;
      back.push_back(p);
      v = ix.node(p).input(0);
    } else if (int slot = ix.scaling_data_slot(p); slot >= 0) {
      v = ix.node(p).input(slot);
    } else if (ix.is(p, "Reshape")) {
      if (out.reshape >= 0) return out.error = "two Reshapes in a head split", out;
      out.reshape = p;
      v = ix.node(p).input(0);
    } else if (ix.is(p, "Add") || ix.is(p, "MatMul")) {
      int mm = p;
      if (ix.is(p, "Add")) {
        const auto& a = ix.node(p);
        if (a.input_size() != 2) return out.error = "an Add with one input", out;
        mm = ix.producer(a.input(0));
        if (!ix.is(mm, "MatMul")) mm = ix.producer(a.input(1));
      }
      if (!ix.weight_matmul(mm, &out.proj)) return out.error = "a head split of something other than a projection", out;
      ix.take_bias(&out.proj);
      if (out.proj.output != v) return out.error = "a projection followed by more than its bias", out;
      if (out.reshape < 0) return out.error = "no Reshape splits the heads", out;
      out.transposes.assign(back.rbegin(), back.rend());
      return out;
    } else {
      return out.error = "a head split through " + ix.node(p).op_type(), out;
    }
  }
  return out.error = "a head split too long to follow", out;
}

// The head count a split Reshape makes ([B, T, H, dh]); 0 when it is not that.
int64_t split_heads(const GraphIndex& ix, const HeadSplit& s, std::vector<ShapeElement>* edits) {
  ShapeSource h = shape_element(ix, s.reshape, 2, 4), d = shape_element(ix, s.reshape, 3, 4);
  const int64_t width = s.proj.cols;
  int64_t heads = 0;
  if (h.found && h.value > 0) heads = h.value;
  else if (d.found && d.value > 0 && width % d.value == 0) heads = width / d.value;
  if (heads <= 0 || width % heads != 0) return 0;
  auto fits = [](const ShapeSource& e, int64_t want) { return e.value == want || e.value == -1 || e.value == kComputed; };
  if (!h.found || !d.found || !fits(h, heads) || !fits(d, width / heads)) return 0;
  if (h.value != -1) edits->push_back(h.at);
  return heads;
}

bool attention_block(const GraphIndex& ix, int softmax, AttentionBlock* b, std::string* why) {
  const auto& sm = ix.node(softmax);
  for (const auto& a : sm.attribute())
    if (a.name() == "axis" && a.i() != -1 && a.i() != 3) return *why = "softmax not over the last axis", false;
  // Back from the Softmax to the scores MatMul.
  std::string v = sm.input(0);
  int scores = -1;
  for (int hops = 0; hops < 4 && scores < 0; ++hops) {
    int p = ix.producer(v);
    if (ix.is(p, "MatMul")) scores = p;
    else if (int slot = ix.scaling_data_slot(p); slot >= 0) v = ix.node(p).input(slot);
    else if (ix.is(p, "Add") && ix.node(p).input_size() == 2) {
      // The scores are the side made by the MatMul or its scaling; the other is the mask. A
      // constant mask with a head axis would need that axis cut too: only masks without pass.
      auto scores_side = [&](int slot) {
        int q = ix.producer(ix.node(p).input(slot));
        return ix.is(q, "MatMul") || ix.scaling_data_slot(q) >= 0;
      };
      int mask_slot = scores_side(0) ? 1 : 0;
      if (!scores_side(1 - mask_slot)) return *why = "scores not made by a MatMul", false;
      const onnx::TensorProto* m = ix.constant(ix.node(p).input(mask_slot));
      if (m && m->dims_size() >= 3 && m->dims(m->dims_size() - 3) != 1) return *why = "a per-head constant mask", false;
      v = ix.node(p).input(1 - mask_slot);
    } else return *why = "scores not made by a MatMul", false;
  }
  if (scores < 0) return *why = "scores not made by a MatMul", false;
  int pv = ix.only_reader(sm.output(0));
  if (!ix.is(pv, "MatMul") || ix.node(pv).input(0) != sm.output(0)) return *why = "probabilities not multiplied by values", false;

  HeadSplit q = follow_split(ix, ix.node(scores).input(0)), k = follow_split(ix, ix.node(scores).input(1)),
            val = follow_split(ix, ix.node(pv).input(1));
  for (const HeadSplit* s : {&q, &k, &val})
    if (!s->error.empty()) return *why = s->error, false;
  std::vector<ShapeElement> edits;
  int64_t hq = split_heads(ix, q, &edits), hk = split_heads(ix, k, &edits), hv = split_heads(ix, val, &edits);
  if (hq == 0 || hk == 0 || hv == 0) return *why = "a head split of an unexpected shape", false;
  if (hq != hk || hq != hv) return *why = "grouped keys and values (fewer key heads than query heads)", false;
  if (q.proj.cols != k.proj.cols || q.proj.cols != val.proj.cols) return *why = "q, k and v of different widths", false;
  if (apply_transposes(ix, {0, 1, 2, 3}, q.transposes) != std::vector<int64_t>{0, 2, 1, 3} ||
      apply_transposes(ix, {0, 1, 2, 3}, k.transposes) != std::vector<int64_t>{0, 2, 3, 1} ||
      apply_transposes(ix, {0, 1, 2, 3}, val.transposes) != std::vector<int64_t>{0, 2, 1, 3})
    return *why = "heads transposed unexpectedly", false;

  // Forward from the context to the merge and the output projection.
  std::string c = ix.node(pv).output(0);
  std::vector<int> transposes;
  int merge = -1;
  for (int hops = 0; hops < 6 && merge < 0; ++hops) {
    int r = ix.only_reader(c);
    if (ix.is(r, "Transpose")) transposes.push_back(r), c = ix.node(r).output(0);
    else if (ix.is(r, "Reshape") && ix.node(r).input(0) == c) merge = r;
    else return *why = "the heads' context not merged by a Reshape", false;
  }
  if (merge < 0 || apply_transposes(ix, {0, 2, 1, 3}, transposes) != std::vector<int64_t>{0, 1, 2, 3})
    return *why = "the heads' context merged unexpectedly", false;
  ShapeSource width = shape_element(ix, merge, 2, 3);
  if (!width.found || (width.value != -1 && width.value != kComputed && width.value != q.proj.cols))
    return *why = "the heads merged to an unexpected shape", false;
  b->merged = ix.node(merge).output(0);
  int o = ix.only_reader(b->merged);
  if (!ix.weight_matmul(o, &b->o) || ix.node(o).input(0) != b->merged || b->o.rows != q.proj.cols)
    return *why = "no output projection after the heads", false;
  ix.take_bias(&b->o);
  if (width.value != -1) {
    width.at.per_head = q.proj.cols / hq;
    edits.push_back(width.at);
  }
  b->q = q.proj, b->k = k.proj, b->v = val.proj;
  b->heads = hq;
  b->head_dim = q.proj.cols / hq;
  b->shape = edits;
  return true;
}

// The element-wise region from a hidden projection's output to the MatMul that reads it back.
bool mlp_block(const GraphIndex& ix, int up_matmul, MlpBlock* b) {
  if (!ix.weight_matmul(up_matmul, &b->up)) return false;
  ix.take_bias(&b->up);
  const int64_t F = b->up.cols;
  std::set<int> region;
  std::set<std::string> produced = {b->up.output};
  std::vector<std::string> todo = {b->up.output};
  int down = -1;
  while (!todo.empty()) {
    std::string v = todo.back();
    todo.pop_back();
    for (int r : ix.readers(v)) {
      if (r == kGraphOutput) return false;
      if (region.count(r) || r == down) continue;
      Projection p;
      if (ix.is(r, "MatMul") && ix.node(r).input(0) == v && ix.weight_matmul(r, &p) && p.rows == F) {
        if (down >= 0) return false;
        down = r;
        continue;
      }
      if (!elementwise_ops().count(ix.node(r).op_type()) || !is_default_domain(ix.node(r).domain()) ||
          ix.node(r).output_size() != 1)
        return false;
      region.insert(r);
      produced.insert(ix.node(r).output(0));
      todo.push_back(ix.node(r).output(0));
    }
  }
  if (down < 0) return false;
  // Every other input of the region is a scalar constant (or empty, Clip's optional bounds).
  for (int r : region)
    for (const auto& in : ix.node(r).input())
      if (!in.empty() && !produced.count(in) && !ix.scalar_constant(in)) return false;
  b->hidden = ix.node(down).input(0);
  ix.weight_matmul(down, &b->down);
  ix.take_bias(&b->down);
  return true;
}

}  // namespace

TransformerBlocks find_transformer_blocks(const onnx::GraphProto& g) {
  GraphIndex ix(g);
  TransformerBlocks out;
  std::set<int> in_attention;
  for (int i = 0; i < g.node_size(); ++i) {
    if (!ix.is(i, "Softmax")) continue;
    AttentionBlock b;
    std::string why;
    if (attention_block(ix, i, &b, &why)) {
      for (const Projection* p : {&b.q, &b.k, &b.v, &b.o}) in_attention.insert(p->matmul);
      out.attention.push_back(std::move(b));
    } else {
      out.skipped.push_back((g.node(i).name().empty() ? "Softmax #" + std::to_string(i) : g.node(i).name()) + ": " + why);
    }
  }
  for (int i = 0; i < g.node_size(); ++i) {
    if (in_attention.count(i) || !ix.is(i, "MatMul")) continue;
    MlpBlock b;
    if (mlp_block(ix, i, &b) && !in_attention.count(b.down.matmul)) out.mlp.push_back(std::move(b));
  }
  std::set<int> in_blocks = in_attention;
  for (const MlpBlock& b : out.mlp) in_blocks.insert(b.up.matmul), in_blocks.insert(b.down.matmul);
  for (int i = 0; i < g.node_size(); ++i) {
    Projection p;
    if (in_blocks.count(i) || !ix.weight_matmul(i, &p)) continue;
    ix.take_bias(&p);
    out.other.push_back(p);
  }
  return out;
}

}  // namespace mminfer::onnx_io
