// Shape arithmetic on dims that shape inference fixed becomes constants at load: Shape(x), and a
// Gather or Slice of Shape(x) that picks only fixed dims (the common case: a symbolic batch and a
// fixed sequence length). fold_constants then folds what follows (Unsqueeze, Concat, Cast, ...),
// so a Reshape often ends with a constant target.
//
// Only dims that are plain numbers are trusted; symbolic and unknown dims (negative) never fold.
// Graph outputs are left alone: their recorded type may be the file's declaration, not inference.
#include <algorithm>
#include <climits>

#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

constexpr int64_t kUnknown = -1;

// What a Shape node outputs as far as recorded dims tell: one entry per element, kUnknown where
// the dim is not a fixed number. start/end (opset 15) clamp like the kernel's.
std::optional<std::vector<int64_t>> shape_node_dims(const ir::Graph& g, const ir::Node& shape) {
  const ir::Value& x = g.values[shape.inputs[0]];
  if (!x.has_shape || x.is_graph_output) return std::nullopt;
  auto start = int_attr(shape, "start", 0), end = int_attr(shape, "end", INT64_MAX);
  if (!start || !end) return std::nullopt;
  int64_t r = static_cast<int64_t>(x.dims.size());
  auto clamp = [r](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + r : v, 0, r); };
  int64_t b = clamp(*start), e = std::max(b, clamp(*end));
  std::vector<int64_t> dims(x.dims.begin() + b, x.dims.begin() + e);
  for (int64_t& d : dims) d = d < 0 ? kUnknown : d;
  return dims;
}

// The live Shape node producing `value`, or nullptr.
const ir::Node* shape_producer(const ir::Graph& g, int value) {
  int p = g.values[value].producer;
  return p >= 0 && is_op(g.nodes[p], "Shape") ? &g.nodes[p] : nullptr;
}

bool all_fixed(const std::vector<int64_t>& dims) {
  return std::all_of(dims.begin(), dims.end(), [](int64_t d) { return d >= 0; });
}

Tensor int64_tensor(const std::vector<int64_t>& values, Shape shape) {
  Tensor t = Tensor::empty(DType::kInt64, std::move(shape));
  std::copy(values.begin(), values.end(), t.data<int64_t>());
  return t;
}

// dims[i] for each index (negative ones count from the end); nullopt when an index is out of
// range (the kernel reports it at run time) or picks a dim that is not fixed.
std::optional<std::vector<int64_t>> pick(const std::vector<int64_t>& dims, const std::vector<int64_t>& indices) {
  int64_t n = static_cast<int64_t>(dims.size());
  std::vector<int64_t> out;
  for (int64_t i : indices) {
    if (i < -n || i >= n) return std::nullopt;
    int64_t d = dims[static_cast<size_t>(i < 0 ? i + n : i)];
    if (d < 0) return std::nullopt;
    out.push_back(d);
  }
  return out;
}

std::optional<Tensor> fold_shape(const ir::Graph& g, const ir::Node& shape) {
  auto dims = shape_node_dims(g, shape);
  if (!dims || !all_fixed(*dims)) return std::nullopt;
  return int64_tensor(*dims, {static_cast<int64_t>(dims->size())});
}

std::optional<Tensor> fold_gather(const ir::Graph& g, const ir::Node& gather) {
  if (gather.inputs.size() != 2) return std::nullopt;
  const ir::Node* shape = shape_producer(g, gather.inputs[0]);
  auto axis = int_attr(gather, "axis", 0);
  if (!shape || !axis || (*axis != 0 && *axis != -1)) return std::nullopt;  // the data is 1-D
  auto dims = shape_node_dims(g, *shape);
  auto indices = int_constant(g, gather.inputs[1]);
  if (!dims || !indices) return std::nullopt;
  auto picked = pick(*dims, *indices);
  if (!picked) return std::nullopt;
  return int64_tensor(*picked, g.values[gather.inputs[1]].constant.shape());
}

std::optional<Tensor> fold_slice(const ir::Graph& g, const ir::Node& slice) {
  const ir::Node* shape = shape_producer(g, slice.inputs[0]);
  if (!shape) return std::nullopt;
  auto dims = shape_node_dims(g, *shape);
  auto p = slice_params(g, slice);
  if (!dims || !p || p->starts.size() != 1 || p->ends.size() != 1) return std::nullopt;
  if (p->axes.size() > 1 || (p->axes.size() == 1 && p->axes[0] != 0 && p->axes[0] != -1)) return std::nullopt;
  if (p->steps.size() > 1 || (p->steps.size() == 1 && p->steps[0] == 0)) return std::nullopt;
  int64_t step = p->steps.empty() ? 1 : p->steps[0];
  auto picked = pick(*dims, slice_positions(static_cast<int64_t>(dims->size()), p->starts[0], p->ends[0], step));
  if (!picked) return std::nullopt;
  return int64_tensor(*picked, {static_cast<int64_t>(picked->size())});
}

std::optional<Tensor> fold(const ir::Graph& g, const ir::Node& n) {
  if (is_op(n, "Shape")) return fold_shape(g, n);
  if (is_op(n, "Gather")) return fold_gather(g, n);
  if (is_op(n, "Slice")) return fold_slice(g, n);
  return std::nullopt;
}

}  // namespace

bool fold_shape_arithmetic(ir::Graph& g, const PassContext&) {
  bool changed = false;
  for (ir::Node& n : g.nodes) {
    if (n.removed || n.outputs.size() != 1) continue;
    std::optional<Tensor> value = fold(g, n);
    if (!value || g.values[n.outputs[0]].is_graph_output) continue;  // graph outputs stay produced by nodes
    make_constant(g.values[n.outputs[0]], *value);
    n.removed = true;
    changed = true;
  }
  return changed;
}

}  // namespace mminfer::passes
