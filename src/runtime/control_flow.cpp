#include "runtime/control_flow.h"

#include <cstring>

#include "kernels/cpu/common/registry.h"
#include "runtime/executor.h"

namespace mminfer::runtime {

namespace {

using kernels::fail;
using kernels::Inputs;
using kernels::KernelSpec;
using kernels::Outputs;
using kernels::TensorDesc;

// A body graph and the slice of the node's inputs that carries its captured outer values.
struct Body {
  std::unique_ptr<Executor> exec;
  size_t formal_inputs = 0;  // the body's own inputs, before captures
  size_t capture_begin = 0;  // index into the node's inputs
  size_t capture_count = 0;

  std::vector<Tensor> run(std::vector<Tensor> formal, const Inputs& node_in) {
    for (size_t i = 0; i < capture_count; ++i) {
      const Tensor* t = node_in[capture_begin + i];
      if (!t) fail("a captured outer value is missing");
      formal.push_back(*t);
    }
    return exec->run(formal, nullptr);
  }
};

// Builds executors for every graph attribute in name order, matching the loader's layout of
// implicit inputs after the formal ones.
std::map<std::string, Body> load_bodies(const KernelSpec& spec) {
  std::map<std::string, Body> bodies;
  size_t next = static_cast<size_t>(spec.a().get_int("mminfer.formal_inputs", static_cast<int64_t>(spec.num_inputs)));
  for (const auto& [name, value] : spec.a().all()) {
    auto* ga = std::get_if<std::shared_ptr<GraphAttr>>(&value);
    if (!ga) continue;
    const ir::Graph& g = *(*ga)->graph;
    Body b;
    b.formal_inputs = g.inputs.size() - g.captures.size();
    b.capture_begin = next;
    b.capture_count = g.captures.size();
    next += b.capture_count;
    b.exec = std::make_unique<Executor>(g, InterOp::kOff);  // bodies run many times; keep them simple
    bodies[name] = std::move(b);
  }
  return bodies;
}

Body& body(std::map<std::string, Body>& bodies, const char* name) {
  auto it = bodies.find(name);
  if (it == bodies.end()) fail(std::string("attribute '") + name + "' (a graph) is missing");
  return it->second;
}

bool truthy(const Tensor& t, const char* what) {
  if (t.numel() != 1) fail(std::string(what) + " must hold one element, got shape " + shape_str(t.shape()));
  return kernels::read_scalar(t, what) != 0;
}

class IfKernel final : public kernels::Kernel {
 public:
  explicit IfKernel(const KernelSpec& spec) : bodies_(load_bodies(spec)) {
    body(bodies_, "then_branch");
    body(bodies_, "else_branch");
  }
  bool outputs_need_run() const override { return true; }
  void infer(const Inputs&, std::vector<TensorDesc>&) override {}
  void run(const Inputs& in, Outputs& out) override {
    bool cond = truthy(kernels::need_input(in, 0, "cond"), "cond");
    std::vector<Tensor> res = body(bodies_, cond ? "then_branch" : "else_branch").run({}, in);
    if (res.size() != out.size())
      fail("branch produced " + std::to_string(res.size()) + " outputs, node has " + std::to_string(out.size()));
    for (size_t i = 0; i < out.size(); ++i) *out[i] = res[i];
  }

 private:
  std::map<std::string, Body> bodies_;
};

// Stacks per-iteration tensors along a new axis at position `axis`.
Tensor stack(const std::vector<Tensor>& parts, int64_t axis, bool reverse) {
  if (parts.empty()) return Tensor::empty(DType::kFloat32, {0});
  const Tensor& first = parts[0];
  for (auto& p : parts)
    if (p.shape() != first.shape() || p.dtype() != first.dtype())
      fail("scan output changes shape between iterations (" + shape_str(first.shape()) + " vs " + shape_str(p.shape()) + ")");
  int64_t rank = static_cast<int64_t>(first.rank()) + 1;
  axis = kernels::normalize_axis(axis, rank, "scan output axis");
  Shape shape = first.shape();
  shape.insert(shape.begin() + axis, static_cast<int64_t>(parts.size()));
  Tensor out = Tensor::empty(first.dtype(), shape);
  size_t es = dtype_size(first.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= first.dim(d);
  for (size_t d = axis; d < first.rank(); ++d) inner *= first.dim(d);
  int64_t n = static_cast<int64_t>(parts.size());
  for (int64_t i = 0; i < n; ++i) {
    const Tensor& p = parts[reverse ? n - 1 - i : i];
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(out.data<char>() + ((o * n + i) * inner) * es, p.data<char>() + o * inner * es, inner * es);
  }
  return out;
}

// Slice `i` of `t` along `axis` (the axis removed).
Tensor take(const Tensor& t, int64_t axis, int64_t i) {
  Shape shape = t.shape();
  int64_t n = shape[axis];
  shape.erase(shape.begin() + axis);
  Tensor out = Tensor::empty(t.dtype(), shape);
  size_t es = dtype_size(t.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= t.dim(d);
  for (size_t d = axis + 1; d < t.rank(); ++d) inner *= t.dim(d);
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(out.data<char>() + o * inner * es, t.data<char>() + ((o * n + i) * inner) * es, inner * es);
  return out;
}

class LoopKernel final : public kernels::Kernel {
 public:
  explicit LoopKernel(const KernelSpec& spec) : bodies_(load_bodies(spec)) {
    formal_ = static_cast<size_t>(spec.a().get_int("mminfer.formal_inputs", static_cast<int64_t>(spec.num_inputs)));
    Body& b = body(bodies_, "body");
    if (b.formal_inputs != formal_) fail("body takes " + std::to_string(b.formal_inputs) + " inputs, the node gives " +
                                         std::to_string(formal_));
  }
  bool outputs_need_run() const override { return true; }
  void infer(const Inputs&, std::vector<TensorDesc>&) override {}
  void run(const Inputs& in, Outputs& out) override {
    Body& b = body(bodies_, "body");
    constexpr int64_t kMaxIterations = int64_t(1) << 31;  // a runaway loop is an error, not a hang
    int64_t max_trips = in[0] && in[0]->defined() ? static_cast<int64_t>(kernels::read_scalar(*in[0], "M")) : kMaxIterations;
    bool cond = in.size() > 1 && in[1] && in[1]->defined() ? truthy(*in[1], "cond") : true;
    size_t carried = formal_ - 2;
    std::vector<Tensor> state;
    for (size_t i = 0; i < carried; ++i) state.push_back(kernels::need_input(in, 2 + i, "loop-carried value"));
    size_t scans = out.size() - carried;
    std::vector<std::vector<Tensor>> scan_parts(scans);
    Tensor iter = Tensor::empty(DType::kInt64, {});
    Tensor cond_t = Tensor::empty(DType::kBool, {});
    for (int64_t i = 0; i < max_trips && cond; ++i) {
      if (i == kMaxIterations - 1) fail("loop ran past its iteration limit");
      *iter.data<int64_t>() = i;
      *cond_t.data<uint8_t>() = 1;
      std::vector<Tensor> formal = {iter.clone(), cond_t.clone()};
      formal.insert(formal.end(), state.begin(), state.end());
      std::vector<Tensor> res = b.run(std::move(formal), in);
      if (res.size() != 1 + carried + scans) fail("body returned " + std::to_string(res.size()) + " outputs");
      cond = truthy(res[0], "cond_out");
      for (size_t k = 0; k < carried; ++k) state[k] = res[1 + k];
      for (size_t k = 0; k < scans; ++k) scan_parts[k].push_back(res[1 + carried + k]);
    }
    for (size_t k = 0; k < carried; ++k) *out[k] = state[k];
    for (size_t k = 0; k < scans; ++k) *out[carried + k] = stack(scan_parts[k], 0, false);
  }

 private:
  std::map<std::string, Body> bodies_;
  size_t formal_ = 0;
};

class ScanKernel final : public kernels::Kernel {
 public:
  explicit ScanKernel(const KernelSpec& spec) : bodies_(load_bodies(spec)) {
    if (spec.opset < 9) fail("Scan before opset 9 (with a batch axis) is not supported");
    formal_ = static_cast<size_t>(spec.a().get_int("mminfer.formal_inputs", static_cast<int64_t>(spec.num_inputs)));
    num_scan_ = spec.a().get_int("num_scan_inputs", 0);
    if (num_scan_ < 1 || static_cast<size_t>(num_scan_) > formal_) fail("num_scan_inputs is out of range");
    in_axes_ = spec.a().get_ints("scan_input_axes", std::vector<int64_t>(num_scan_, 0));
    in_dirs_ = spec.a().get_ints("scan_input_directions", std::vector<int64_t>(num_scan_, 0));
    out_axes_ = spec.a().get_ints("scan_output_axes");
    out_dirs_ = spec.a().get_ints("scan_output_directions");
    if (in_axes_.size() != static_cast<size_t>(num_scan_) || in_dirs_.size() != static_cast<size_t>(num_scan_))
      fail("scan_input_axes/directions must have num_scan_inputs entries");
  }
  bool outputs_need_run() const override { return true; }
  void infer(const Inputs&, std::vector<TensorDesc>&) override {}
  void run(const Inputs& in, Outputs& out) override {
    Body& b = body(bodies_, "body");
    size_t states = formal_ - static_cast<size_t>(num_scan_);
    std::vector<Tensor> state;
    for (size_t i = 0; i < states; ++i) state.push_back(kernels::need_input(in, i, "initial state"));
    std::vector<Tensor> scan_in;
    std::vector<int64_t> axes;
    int64_t length = -1;
    for (int64_t k = 0; k < num_scan_; ++k) {
      const Tensor& t = kernels::need_input(in, states + k, "scan input");
      int64_t axis = kernels::normalize_axis(in_axes_[k], static_cast<int64_t>(t.rank()), "scan_input_axes value");
      if (length >= 0 && t.dim(axis) != length) fail("scan inputs disagree on the sequence length");
      length = t.dim(axis);
      scan_in.push_back(t);
      axes.push_back(axis);
    }
    size_t scan_outs = out.size() - states;
    std::vector<std::vector<Tensor>> parts(scan_outs);
    for (int64_t i = 0; i < length; ++i) {
      std::vector<Tensor> formal = state;
      for (int64_t k = 0; k < num_scan_; ++k) formal.push_back(take(scan_in[k], axes[k], in_dirs_[k] ? length - 1 - i : i));
      std::vector<Tensor> res = b.run(std::move(formal), in);
      if (res.size() != states + scan_outs) fail("body returned " + std::to_string(res.size()) + " outputs");
      for (size_t s = 0; s < states; ++s) state[s] = res[s];
      for (size_t k = 0; k < scan_outs; ++k) parts[k].push_back(res[states + k]);
    }
    for (size_t s = 0; s < states; ++s) *out[s] = state[s];
    for (size_t k = 0; k < scan_outs; ++k) {
      int64_t axis = k < out_axes_.size() ? out_axes_[k] : 0;
      bool reverse = k < out_dirs_.size() && out_dirs_[k];
      *out[states + k] = stack(parts[k], axis, reverse);
    }
  }

 private:
  std::map<std::string, Body> bodies_;
  size_t formal_ = 0;
  int64_t num_scan_ = 0;
  std::vector<int64_t> in_axes_, in_dirs_, out_axes_, out_dirs_;
};

}  // namespace

void register_control_flow(kernels::Registry& r) {
  using kernels::kNotFoldable;
  r.add({"If", "", 1, 1000, 0, {}, [](const KernelSpec& s) { return std::make_unique<IfKernel>(s); }}, kNotFoldable);
  r.add({"Loop", "", 1, 1000, 0, {}, [](const KernelSpec& s) { return std::make_unique<LoopKernel>(s); }},
        kNotFoldable);
  r.add({"Scan", "", 1, 1000, 0, {}, [](const KernelSpec& s) { return std::make_unique<ScanKernel>(s); }},
        kNotFoldable);
}

}  // namespace mminfer::runtime
