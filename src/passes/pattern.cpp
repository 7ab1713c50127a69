#include "passes/pattern.h"

#include <algorithm>
#include <climits>

#include "core/half.h"

namespace mminfer::passes {

UseCounts::UseCounts(const ir::Graph& g) : counts_(g.values.size(), 0), reader_(g.values.size(), -1) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].removed) continue;
    for (int in : g.nodes[i].inputs)
      if (in >= 0) {
        ++counts_[in];
        reader_[in] = static_cast<int>(i);
      }
  }
  for (int o : g.outputs) counts_[o] += 1000;  // an output is never "only read" by a node
}

int UseCounts::only_reader(int value) const {
  if (value < 0 || counts_[value] != 1) return -1;
  return reader_[value];
}

bool is_op(const ir::Node& n, const char* op) {
  if (n.removed || !n.domain.empty() || n.op_type != op) return false;
  // Passes index inputs and outputs freely, so a malformed node never matches.
  if (n.inputs.empty() || n.inputs[0] < 0 || n.outputs.empty() || n.outputs[0] < 0) return false;
  static const char* kBinary[] = {"Add", "Sub", "Mul", "Div", "Pow", "MatMul"};
  for (const char* b : kBinary)
    if (n.op_type == b) return n.inputs.size() == 2 && n.inputs[1] >= 0;
  return true;
}

int other_input(const ir::Node& n, int v) {
  if (n.inputs.size() != 2) return -1;
  if (n.inputs[0] == v) return n.inputs[1];
  if (n.inputs[1] == v) return n.inputs[0];
  return -1;
}

std::optional<float> scalar_constant(const ir::Graph& g, int value) {
  if (value < 0 || !g.values[value].is_constant) return std::nullopt;
  const Tensor& t = g.values[value].constant;
  if (t.numel() != 1) return std::nullopt;
  switch (t.dtype()) {
    case DType::kFloat32: return t.data<float>()[0];
    case DType::kFloat64: return static_cast<float>(t.data<double>()[0]);
    case DType::kFloat16: return half_to_float(t.data<uint16_t>()[0]);
    default: return std::nullopt;
  }
}

std::optional<std::vector<int64_t>> int_constant(const ir::Graph& g, int value) {
  if (value < 0 || !g.values[value].is_constant) return std::nullopt;
  const Tensor& t = g.values[value].constant;
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::kInt64) std::copy(t.data<int64_t>(), t.data<int64_t>() + out.size(), out.begin());
  else if (t.dtype() == DType::kInt32) std::copy(t.data<int32_t>(), t.data<int32_t>() + out.size(), out.begin());
  else return std::nullopt;
  return out;
}

std::optional<int64_t> int_attr(const ir::Node& n, const std::string& name, int64_t fallback) {
  try {
    return n.attrs.get_int(name, fallback);
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::optional<std::vector<int64_t>> ints_attr(const ir::Node& n, const std::string& name) {
  auto it = n.attrs.all().find(name);
  if (it == n.attrs.all().end()) return std::nullopt;
  if (auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return *v;
  return std::nullopt;
}

namespace {
// Where shape inference gave up (shapes computed at run time), the rank often still follows
// from the producer: a Transpose's perm, or an op that keeps its input's rank.
int rank_from_producer(const ir::Graph& g, int value, int depth) {
  if (value < 0) return -1;
  const ir::Value& v = g.values[value];
  if (v.has_shape) return static_cast<int>(v.dims.size());
  if (depth > 8 || v.producer < 0) return -1;
  const ir::Node& n = g.nodes[v.producer];
  if (!n.domain.empty() || n.inputs.empty()) return -1;
  if (n.op_type == "Transpose" && n.attrs.has("perm")) {
    auto perm = ints_attr(n, "perm");
    return perm ? static_cast<int>(perm->size()) : -1;
  }
  if (n.op_type == "Softmax" || n.op_type == "Relu" || n.op_type == "Sigmoid" || n.op_type == "Erf" || n.op_type == "Cast")
    return rank_from_producer(g, n.inputs[0], depth + 1);
  if (n.op_type == "Mul" || n.op_type == "Div" || n.op_type == "Add" || n.op_type == "Sub") {
    // With a constant operand the result has the larger of the two ranks.
    for (int k = 0; k < 2 && n.inputs.size() == 2; ++k) {
      const ir::Value& c = g.values[n.inputs[k]];
      if (n.inputs[k] < 0 || n.inputs[1 - k] < 0 || !c.is_constant) continue;
      int other = rank_from_producer(g, n.inputs[1 - k], depth + 1);
      return other < 0 ? -1 : std::max(other, static_cast<int>(c.constant.rank()));
    }
    return -1;
  }
  if (n.op_type == "Slice") return rank_from_producer(g, n.inputs[0], depth + 1);
  if (n.op_type == "Reshape" && n.inputs.size() == 2 && n.inputs[1] >= 0) {
    // As many dims as the target has entries, when the target's length is known.
    const ir::Value& target = g.values[n.inputs[1]];
    if (target.is_constant) return static_cast<int>(target.constant.numel());
    return target.has_shape && target.dims.size() == 1 && target.dims[0] >= 0 ? static_cast<int>(target.dims[0]) : -1;
  }
  if (n.op_type == "Squeeze" || n.op_type == "Unsqueeze") {
    std::optional<std::vector<int64_t>> axes =
        n.opset < 13 ? ints_attr(n, "axes") : (n.inputs.size() > 1 ? int_constant(g, n.inputs[1]) : std::nullopt);
    int in = rank_from_producer(g, n.inputs[0], depth + 1);
    if (!axes || in < 0) return -1;
    int r = n.op_type == "Squeeze" ? in - static_cast<int>(axes->size()) : in + static_cast<int>(axes->size());
    return r >= 0 ? r : -1;
  }
  if (n.op_type == "MatMul" && n.inputs.size() == 2) {
    int a = rank_from_producer(g, n.inputs[0], depth + 1), b = rank_from_producer(g, n.inputs[1], depth + 1);
    return a >= 2 && a == b ? a : -1;
  }
  return -1;
}
}  // namespace

int known_rank(const ir::Graph& g, int value) { return rank_from_producer(g, value, 0); }

void replace_nodes(ir::Graph& g, const std::vector<int>& old_nodes, ir::Node fused) {
  for (int n : old_nodes) g.nodes[n].removed = true;
  g.nodes.push_back(std::move(fused));
  g.relink();
}

void drop_unread_inputs(ir::Graph& g) {
  std::vector<bool> read(g.values.size(), false);
  for (const auto& n : g.nodes)
    if (!n.removed)
      for (int in : n.inputs)
        if (in >= 0) read[in] = true;
  std::vector<int> kept;
  for (int in : g.inputs) {
    if (read[in] || g.values[in].is_graph_output) kept.push_back(in);
    else g.values[in].is_graph_input = false;
  }
  g.inputs = kept;
}

void release_unread_constants(ir::Graph& g, const std::vector<int>& values) {
  UseCounts uses(g);
  for (int v : values) {
    ir::Value& value = g.values[v];
    if (uses.count(v) > 0 || value.is_graph_output || value.is_graph_input) continue;
    value.is_constant = false;
    value.constant = Tensor();
  }
}

void make_constant(ir::Value& v, const Tensor& t) {
  v.is_constant = true;
  v.constant = t;
  v.dtype = t.dtype();
  v.has_shape = true;
  v.dims = t.shape();
  v.symbols.assign(v.dims.size(), "");
}

std::string fresh_name(const ir::Graph& g, const std::string& base) {
  std::string name = base;
  for (int i = 1; g.find_value(name) >= 0; ++i) name = base + "_" + std::to_string(i);
  return name;
}

ir::Node default_node(const ir::Graph& g, const std::string& op, const std::string& name, std::vector<int> inputs,
                      int output) {
  ir::Node n;
  n.op_type = op;
  n.name = name;
  n.opset = g.opsets.count("") ? g.opsets.at("") : 0;
  n.inputs = std::move(inputs);
  n.outputs = {output};
  return n;
}

ir::Node mminfer_node(const std::string& op, const std::string& name, std::vector<int> inputs, std::vector<int> outputs) {
  ir::Node n;
  n.op_type = op;
  n.name = name;
  n.domain = "mminfer";
  n.opset = 1;
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  return n;
}

int add_int64_constant(ir::Graph& g, const std::string& name, const std::vector<int64_t>& v) {
  Tensor t = Tensor::empty(DType::kInt64, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  int id = g.add_value(fresh_name(g, name));
  make_constant(g.values[id], t);
  return id;
}

namespace {
const char* const kPrecisionAttrs[] = {"precision", "int8_activations", "int8_range"};
}

void copy_precision_attrs(const ir::Node& from, ir::Node& to) {
  for (const char* name : kPrecisionAttrs) {
    auto it = from.attrs.all().find(name);
    if (it != from.attrs.all().end()) to.attrs.set(name, it->second);
  }
}

bool same_precision_attrs(const ir::Node& a, const ir::Node& b) {
  return a.attrs.get_string("precision", "") == b.attrs.get_string("precision", "") &&
         a.attrs.get_string("int8_activations", "") == b.attrs.get_string("int8_activations", "") &&
         a.attrs.get_floats("int8_range") == b.attrs.get_floats("int8_range");
}

std::vector<int64_t> slice_positions(int64_t n, int64_t start, int64_t end, int64_t step) {
  std::vector<int64_t> pos;
  if (n == 0) return pos;
  if (start < 0) start += n;
  if (end < 0) end += n;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, n);
    end = std::clamp<int64_t>(end, 0, n);
    for (int64_t k = 0, count = end > start ? (end - start - 1) / step + 1 : 0; k < count; ++k)
      pos.push_back(start + k * step);
  } else {
    start = std::clamp<int64_t>(start, 0, n - 1);
    end = std::clamp<int64_t>(end, -1, n - 1);
    int64_t mag = step == INT64_MIN ? INT64_MAX : -step;
    for (int64_t k = 0, count = start > end ? (start - end - 1) / mag + 1 : 0; k < count; ++k)
      pos.push_back(start - k * mag);
  }
  return pos;
}

std::optional<SliceParams> slice_params(const ir::Graph& g, const ir::Node& slice) {
  SliceParams p;
  if (slice.opset < 10) {
    auto starts = ints_attr(slice, "starts"), ends = ints_attr(slice, "ends");
    if (!starts || !ends) return std::nullopt;
    p.starts = *starts;
    p.ends = *ends;
    if (slice.attrs.has("axes")) {
      auto axes = ints_attr(slice, "axes");
      if (!axes) return std::nullopt;
      p.axes = *axes;
    }
    return p;
  }
  auto input = [&](size_t i) { return i < slice.inputs.size() ? slice.inputs[i] : ir::kNoValue; };
  std::vector<int64_t>* fields[] = {&p.starts, &p.ends, &p.axes, &p.steps};
  for (size_t i = 1; i <= 4; ++i) {
    if (input(i) < 0) {
      if (i <= 2) return std::nullopt;  // starts and ends are required
      continue;
    }
    auto values = int_constant(g, input(i));
    if (!values) return std::nullopt;
    *fields[i - 1] = *values;
  }
  return p;
}

std::optional<SiluMatch> match_silu(const ir::Graph& g, const UseCounts& uses, int y) {
  if (uses.count(y) != 2) return std::nullopt;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& sig = g.nodes[i];
    if (!is_op(sig, "Sigmoid")) continue;
    std::vector<int> nodes = {static_cast<int>(i)};
    float alpha = 1.f;
    int in = sig.inputs[0];
    if (in != y) {
      int p = g.values[in].producer;
      if (p < 0 || !is_op(g.nodes[p], "Mul") || uses.only_reader(in) < 0) continue;
      const ir::Node& scale = g.nodes[p];
      int other = scale.inputs[0] == y ? scale.inputs[1] : scale.inputs[1] == y ? scale.inputs[0] : -1;
      auto c = other >= 0 ? scalar_constant(g, other) : std::nullopt;
      if (!c) continue;
      alpha = *c;
      nodes.push_back(p);
    }
    int mul = uses.only_reader(sig.outputs[0]);
    if (mul < 0 || !is_op(g.nodes[mul], "Mul")) continue;
    const ir::Node& m = g.nodes[mul];
    if (!((m.inputs[0] == y && m.inputs[1] == sig.outputs[0]) || (m.inputs[1] == y && m.inputs[0] == sig.outputs[0]))) continue;
    nodes.push_back(mul);
    return SiluMatch{alpha, nodes, m.outputs[0]};
  }
  return std::nullopt;
}

}  // namespace mminfer::passes
