#include "runtime/executor.h"

#include <chrono>
#include <climits>
#include <exception>
#include <cstdlib>

#include "core/parallel.h"
#include "core/spin_team.h"
#include "runtime/node_kernel.h"
#include "runtime/kernel_registry.h"
#include "runtime/memory_plan.h"

namespace mminfer::runtime {

using kernels::TensorDesc;

Executor::Executor(ir::Graph graph, InterOp inter_op) : graph_(std::move(graph)), inter_op_(inter_op) {
  std::vector<int> order = graph_.topological_order();
  branches_ = find_branches(graph_, order);
  for (int ni : order) {
    const ir::Node& node = graph_.nodes[ni];
    Step step;
    step.node = ni;
    step.kernel = create_kernel(graph_, node);
    step.inputs = node.inputs;
    step.outputs = node.outputs;
    runs_onednn_ = runs_onednn_ || step.kernel->runs_onednn();
    step.infers_from_shapes = step.kernel->infers_from_shapes();
    for (int o : step.outputs) step.infers_from_shapes = step.infers_from_shapes && o >= 0;
    steps_.push_back(std::move(step));
  }
  last_use_.assign(graph_.values.size(), -1);
  for (size_t s = 0; s < steps_.size(); ++s)
    for (int v : steps_[s].inputs)
      if (v >= 0) last_use_[v] = static_cast<int>(s);
  for (int o : graph_.outputs) last_use_[o] = INT_MAX;
  for (size_t v = 0; v < graph_.values.size(); ++v) {
    const ir::Value& val = graph_.values[v];
    if (val.is_constant || val.is_graph_input || val.is_graph_output) continue;
    if (last_use_[v] >= 0 && last_use_[v] != INT_MAX) steps_[last_use_[v]].release.push_back(static_cast<int>(v));
  }
  // Outputs nobody reads are released right after their producer runs.
  for (size_t s = 0; s < steps_.size(); ++s)
    for (int o : steps_[s].outputs)
      if (o >= 0 && last_use_[o] < 0 && !graph_.values[o].is_graph_output) steps_[s].release.push_back(o);
  values_.resize(graph_.values.size());
  for (size_t v = 0; v < graph_.values.size(); ++v) {
    if (graph_.values[v].is_constant)
      values_[v] = graph_.values[v].constant;
    else
      computed_.push_back(static_cast<int>(v));
  }
  // values_ keeps its size from here on, so these slots stay valid.
  for (Step& st : steps_) {
    for (int v : st.inputs) st.slot_in.push_back(v >= 0 ? &values_[static_cast<size_t>(v)] : nullptr);
    for (int o : st.outputs) st.slot_out.push_back(o >= 0 ? &values_[static_cast<size_t>(o)] : nullptr);
  }
}

Executor::~Executor() = default;

Executor::ShapePlan Executor::build_plan(Recording& rec) const {
  ShapePlan plan;
  const std::vector<TensorDesc>& descs = rec.descs;
  plan.descs = descs;
  plan.skip.assign(steps_.size(), false);
  for (size_t s = 0; s < steps_.size(); ++s) {
    bool all_frozen = !steps_[s].outputs.empty();
    for (int o : steps_[s].outputs)
      all_frozen = all_frozen && (o < 0 || (rec.shape_only[o] && !graph_.values[o].is_graph_output));
    plan.skip[s] = all_frozen;
    if (!all_frozen) {
      plan.active.push_back(static_cast<int>(s));
      continue;
    }
    for (int o : steps_[s].outputs)
      if (o >= 0) plan.frozen.emplace_back(o, rec.values[o]);
  }
  plan.is_frozen.assign(graph_.values.size(), false);
  for (const auto& f : plan.frozen) plan.is_frozen[static_cast<size_t>(f.first)] = true;
  plan.offset.assign(graph_.values.size(), -1);
  plan.viewed.assign(graph_.values.size(), false);
  plan.source.assign(graph_.values.size(), -1);
  plan.source_offset.assign(graph_.values.size(), 0);
  size_t n = graph_.values.size();
  // Follow aliases (Reshape and friends) to the buffer that really holds the bytes.
  std::vector<int> root(n);
  for (size_t v = 0; v < n; ++v) root[v] = static_cast<int>(v);
  std::vector<int> first(n, -1), last(n, -1);
  std::vector<int> request_of(n, -1);
  std::vector<BufferRequest> requests;
  auto plannable = [&](int v) {
    const ir::Value& val = graph_.values[v];
    return !val.is_constant && !val.is_graph_input && !val.is_graph_output;
  };
  for (size_t s = 0; s < steps_.size(); ++s) {
    const Step& st = steps_[s];
    if (st.kernel->outputs_need_run() || plan.skip[s]) continue;
    for (size_t oi = 0; oi < st.outputs.size(); ++oi) {
      int o = st.outputs[oi];
      if (o < 0) continue;
      int a = st.kernel->alias_input(static_cast<int>(oi));
      int source = a >= 0 && static_cast<size_t>(a) < st.inputs.size() ? st.inputs[a] : rec.view_of[o];
      if (source >= 0) {
        int r = root[source];
        root[o] = r;
        // A graph output must own its bytes, so an alias of an arena buffer is not allowed.
        if (!plannable(o) && request_of[r] >= 0) {
          root[o] = o;
          continue;
        }
        plan.viewed[o] = rec.view_of[o] >= 0;
        plan.source[o] = source, plan.source_offset[o] = rec.view_offset[o];
        if (request_of[r] >= 0) {
          int lu = last_use_[o] < 0 ? static_cast<int>(s) : last_use_[o];
          auto& req = requests[request_of[r]];
          req.last_step = std::max(req.last_step, lu);
        }
        continue;
      }
      if (!plannable(o)) continue;
      size_t bytes = static_cast<size_t>(shape_numel(descs[o].shape)) * dtype_size(descs[o].dtype);
      int lu = last_use_[o] < 0 ? static_cast<int>(s) : last_use_[o];
      // In place: reuse an input's buffer when this step is its last reader.
      int ip = st.kernel->inplace_input(static_cast<int>(oi));
      if (ip >= 0 && static_cast<size_t>(ip) < st.inputs.size() && st.inputs[ip] >= 0) {
        int r = root[st.inputs[ip]];
        if (request_of[r] >= 0) {
          auto& req = requests[request_of[r]];
          size_t rbytes = static_cast<size_t>(shape_numel(descs[r].shape)) * dtype_size(descs[r].dtype);
          if (req.last_step == static_cast<int>(s) && rbytes == bytes) {
            req.last_step = lu;
            request_of[o] = request_of[r];
            root[o] = r;
            continue;
          }
        }
      }
      request_of[o] = static_cast<int>(requests.size());
      requests.push_back({bytes, static_cast<int>(s), lu, branches_.branch_of_step[s]});
    }
  }
  mark_fixed_steps(plan);
  MemoryPlan mp = plan_memory(requests);
  plan.arena_bytes = mp.total_bytes;
  for (size_t v = 0; v < n; ++v)
    if (request_of[v] >= 0 && root[v] == static_cast<int>(v)) plan.offset[v] = static_cast<int64_t>(mp.offsets[request_of[v]]);
  // In-place outputs share the offset of the buffer they overwrite.
  for (size_t v = 0; v < n; ++v)
    if (request_of[v] >= 0 && root[v] != static_cast<int>(v)) plan.offset[v] = static_cast<int64_t>(mp.offsets[request_of[v]]);
  mark_direct_steps(plan);
  return plan;
}

void Executor::mark_fixed_steps(ShapePlan& plan) const {
  plan.fixed.assign(steps_.size(), false);
  auto settled = [&](int v) { return v < 0 || graph_.values[v].is_constant || plan.is_frozen[static_cast<size_t>(v)]; };
  for (int s : plan.active) {
    const Step& st = steps_[static_cast<size_t>(s)];
    if (st.kernel->outputs_need_run() || st.outputs.empty()) continue;
    int source = -1;
    bool fixed = true;
    for (int o : st.outputs) {
      // A graph output must own its bytes: the run copies it.
      const int from = o < 0 || graph_.values[o].is_graph_output ? -1 : plan.source[static_cast<size_t>(o)];
      fixed = fixed && from >= 0 && (source < 0 || from == source);
      source = from;
    }
    for (int v : st.inputs) fixed = fixed && (v == source || settled(v));
    plan.fixed[static_cast<size_t>(s)] = fixed;
  }
}

void Executor::mark_direct_steps(ShapePlan& plan) const {
  plan.direct.assign(steps_.size(), false);
  // Values whose bytes lie at one address on every run of the plan and stay in place between
  // runs: frozen values, the arena's buffers and views of them. (A view of a constant is
  // released by its last reader, so a step that makes one runs every time.)
  std::vector<bool> placed(graph_.values.size(), false);
  for (size_t v = 0; v < placed.size(); ++v) placed[v] = plan.is_frozen[v];
  for (int s : plan.active) {
    const Step& st = steps_[static_cast<size_t>(s)];
    if (st.kernel->outputs_need_run()) continue;
    const bool fixed = plan.fixed[static_cast<size_t>(s)];
    bool direct = !st.outputs.empty() && (fixed || st.infers_from_shapes);
    for (size_t i = 0; i < st.outputs.size(); ++i) {
      const int o = st.outputs[i];
      // Any step places an output the plan gives an arena buffer there while its shape is the
      // planned one, which a steady run checks after each step that is not direct.
      const bool in_buffer = o >= 0 && plan.offset[static_cast<size_t>(o)] >= 0 && !plan.viewed[static_cast<size_t>(o)] &&
                             st.kernel->alias_input(static_cast<int>(i)) < 0;
      direct = direct && (fixed ? placed[static_cast<size_t>(plan.source[static_cast<size_t>(o)])] : in_buffer);
      if (o >= 0) placed[static_cast<size_t>(o)] = in_buffer;
    }
    if (fixed && direct)
      for (int o : st.outputs) placed[static_cast<size_t>(o)] = true;
    plan.direct[static_cast<size_t>(s)] = direct;
  }
}

namespace {
std::string describe_shapes(const kernels::Inputs& in, const kernels::Outputs& out) {
  std::string s;
  for (size_t i = 0; i < in.size(); ++i) {
    if (i) s += ", ";
    s += in[i] && in[i]->defined() ? shape_str(in[i]->shape()) : "-";
  }
  s += " -> ";
  for (size_t i = 0; i < out.size(); ++i) {
    if (i) s += ", ";
    s += out[i] && out[i]->defined() ? shape_str(out[i]->shape()) : "-";
  }
  return s;
}
}  // namespace

namespace {
// Ops whose outputs depend only on input shapes, or that must never be frozen (KernelTraits).
bool reads_only_shape(const ir::Node& n) { return n.domain.empty() && (n.op_type == "Shape" || n.op_type == "Size"); }
bool never_freeze(const ir::Node& n) {
  const kernels::KernelTraits* traits = kernel_registry().traits(n.domain, n.op_type);
  return !traits || !traits->foldable;
}
// Shape-derived values larger than this are recomputed each run rather than stored.
constexpr size_t kMaxFrozenBytes = size_t(1) << 20;

// MMINFER_SPIN_TEAM=on|off overrides the timed choice of a held spin team (for benchmarks).
enum class Setting { kAuto, kOn, kOff };
Setting spin_team_setting() {
  static const Setting s = [] {
    const char* v = std::getenv("MMINFER_SPIN_TEAM");
    std::string x = v ? v : "";
    return x == "on" ? Setting::kOn : x == "off" ? Setting::kOff : Setting::kAuto;
  }();
  return s;
}
}  // namespace

namespace {
bool same_desc(const TensorDesc& a, const TensorDesc& b) { return a.dtype == b.dtype && a.shape == b.shape; }
bool has_desc(const Tensor& t, const TensorDesc& d) { return t.dtype() == d.dtype && t.shape() == d.shape; }
bool same_view(const Tensor& t, const void* at, const TensorDesc& d) { return t.raw() == at && has_desc(t, d); }
std::string node_error(const ir::Graph& graph, const ir::Node& node, const std::string& what) {
  return "node '" + graph.label(node) + "' (" + node.op_type + "): " + what;
}
}  // namespace

// With a plan, values must already hold its frozen values (run() sees to it).
bool Executor::execute(std::vector<Tensor>& values, const ShapePlan* plan, Recording* record, Profiler* profiler) {
  if (plan && plan == steady_ && !record && !profiler) return execute_steady(values, *plan);
  StepScratch scratch;
  if (plan)
    for (int si : plan->active) run_step(static_cast<size_t>(si), values, plan, record, profiler, scratch);
  else
    for (size_t si = 0; si < steps_.size(); ++si) run_step(si, values, plan, record, profiler, scratch);
  return false;
}

// The last run of this plan left every direct step's outputs where the plan puts them, and the
// values feeding them keep the planned shapes as long as each other step's outputs do: direct
// steps run on their slots with no check at all. The first other step whose outputs leave the
// plan (a shape the data decided) sends the rest of the run through run_step.
bool Executor::execute_steady(std::vector<Tensor>& values, const ShapePlan& plan) {
  StepScratch scratch;
  bool on_plan = true;
  for (int si : plan.active) {
    Step& st = steps_[static_cast<size_t>(si)];
    if (on_plan && plan.direct[static_cast<size_t>(si)]) {
      if (plan.fixed[static_cast<size_t>(si)]) continue;  // its views are still in place
      try {
        st.kernel->run(st.slot_in, st.slot_out);
      } catch (const Error& e) {
        throw Error(node_error(graph_, graph_.nodes[st.node], e.what()));
      } catch (const std::bad_alloc&) {
        throw Error(node_error(graph_, graph_.nodes[st.node], "out of memory"));
      }
      release_after(st, values, &plan);
      continue;
    }
    run_step(static_cast<size_t>(si), values, &plan, nullptr, nullptr, scratch);
    for (int o : st.outputs) on_plan = on_plan && (o < 0 || has_desc(values[o], plan.descs[static_cast<size_t>(o)]));
  }
  return on_plan;
}

void Executor::execute_branches(std::vector<Tensor>& values, const ShapePlan& plan) {
  int n = static_cast<int>(branches_.steps.size());
  std::vector<std::exception_ptr> failure(static_cast<size_t>(n));
  // Inside this region kernels see omp_in_parallel() and run single-threaded (oneDNN too).
#pragma omp parallel for num_threads(std::min(n, num_threads())) schedule(static, 1)
  for (int b = 0; b < n; ++b) {
    try {
      StepScratch scratch;
      for (int si : branches_.steps[static_cast<size_t>(b)]) run_step(static_cast<size_t>(si), values, &plan, nullptr, nullptr, scratch);
    } catch (...) {
      failure[static_cast<size_t>(b)] = std::current_exception();
    }
  }
  for (auto& f : failure)
    if (f) std::rethrow_exception(f);
}

bool Executor::left_as_planned(const ShapePlan& plan, const std::vector<Tensor>& values) const {
  const char* arena = static_cast<const char*>(arena_.get());
  for (int s : plan.active) {
    if (!plan.direct[static_cast<size_t>(s)]) continue;
    const bool fixed = plan.fixed[static_cast<size_t>(s)];
    for (int o : steps_[static_cast<size_t>(s)].outputs) {
      const size_t v = static_cast<size_t>(o);
      const char* at = fixed ? static_cast<const char*>(values[static_cast<size_t>(plan.source[v])].raw()) + plan.source_offset[v]
                             : arena + plan.offset[v];
      if (!same_view(values[v], at, plan.descs[v])) return false;
    }
  }
  return true;
}

// A plan's frozen values stay for the next run of the same shapes, and so do its views of the
// arena: they own nothing, and the next run makes the same ones again (same_view).
void Executor::release_after(const Step& st, std::vector<Tensor>& values, const ShapePlan* plan) const {
  for (int v : st.release)
    if (!plan || !(plan->is_frozen[static_cast<size_t>(v)] || in_arena(values[v]))) values[v] = Tensor();
}

bool Executor::inputs_as_planned(const Step& st, const ShapePlan& plan, const std::vector<Tensor>& values) const {
  for (int v : st.inputs)
    if (v >= 0 && !graph_.values[v].is_constant && !has_desc(values[v], plan.descs[static_cast<size_t>(v)])) return false;
  return true;
}

// Bytes in the arena: a view of them owns nothing.
bool Executor::in_arena(const Tensor& t) const {
  const char* base = static_cast<const char*>(arena_.get());
  return base && t.raw() >= base && t.raw() < base + arena_bytes_;
}

void Executor::run_step(size_t si, std::vector<Tensor>& values, const ShapePlan* plan, Recording* record,
                        Profiler* profiler, StepScratch& s) {
  char* arena = plan ? static_cast<char*>(arena_.get()) : nullptr;
  kernels::Inputs& in = s.in;
  kernels::Outputs& out = s.out;
  std::vector<TensorDesc>& descs = s.descs;
  std::vector<Tensor>& scratch = s.omitted;
  Step& st = steps_[si];
  const ir::Node& node = graph_.nodes[st.node];
  auto release = [&] { release_after(st, values, plan); };
  if (plan && plan->skip[si]) {
    release();
    return;
  }
  if (plan && plan->fixed[si] && !profiler) {
    const int source = plan->source[static_cast<size_t>(st.outputs[0])];
    const Tensor& from = values[source];
    if (from.defined() && has_desc(from, plan->descs[source])) {
      char* bytes = static_cast<char*>(const_cast<void*>(from.raw()));
      for (int o : st.outputs)
        if (!same_view(values[o], bytes + plan->source_offset[o], plan->descs[o]))
          values[o] = Tensor::alias(from, plan->descs[o].dtype, plan->descs[o].shape, bytes + plan->source_offset[o]);
      release();
      return;
    }
  }
  in.clear();
  for (int v : st.inputs) in.push_back(v >= 0 ? &values[v] : nullptr);
  out.assign(st.outputs.size(), nullptr);
  if (scratch.size() < st.outputs.size()) scratch.resize(st.outputs.size());
  for (size_t i = 0; i < st.outputs.size(); ++i) out[i] = st.outputs[i] >= 0 ? &values[st.outputs[i]] : &scratch[i];
  int64_t t0 = profiler ? profiler->now_us() : 0;
  try {
    for (size_t i = 0; i < in.size(); ++i)
      if (in[i] && !in[i]->defined())
        throw Error("input " + std::to_string(i) + " ('" + graph_.values[st.inputs[i]].name + "') has no value");
    bool aliased_only = false;
    if (st.kernel->outputs_need_run()) {
      for (Tensor* t : out) *t = Tensor();
      st.kernel->run(in, out);
    } else {
      // Inputs of the planned shapes give the planned outputs, where the kernel says so.
      const bool as_planned = plan && st.infers_from_shapes && inputs_as_planned(st, *plan, values);
      if (!as_planned) {
        descs.assign(st.outputs.size(), TensorDesc{});
        st.kernel->infer(in, descs);
      }
      aliased_only = true;
      for (size_t i = 0; i < st.outputs.size(); ++i) {
        const TensorDesc& d = as_planned ? plan->descs[static_cast<size_t>(st.outputs[i])] : descs[i];
        int o = st.outputs[i];
        int a = st.kernel->alias_input(static_cast<int>(i));
        const size_t bytes = static_cast<size_t>(shape_numel(d.shape)) * dtype_size(d.dtype);
        // A view of an input's bytes: on a planned run only where the plan kept that input's
        // buffer alive for it.
        int64_t offset = 0;
        if (a < 0 && o >= 0 && !graph_.values[o].is_graph_output && (!plan || plan->viewed[o])) {
          a = st.kernel->view_input(static_cast<int>(i), in, descs, &offset);
          if (a >= 0 && (!in[a] || offset < 0 || static_cast<size_t>(offset) + bytes > in[a]->nbytes())) a = -1;
          if (a >= 0) {
            *out[i] = Tensor::alias(*in[a], d.dtype, d.shape, static_cast<char*>(const_cast<void*>(in[a]->raw())) + offset);
            if (record) record->view_of[o] = st.inputs[a], record->view_offset[o] = offset;
            continue;
          }
        }
        if (a >= 0 && in[a] && !(o >= 0 && graph_.values[o].is_graph_output)) {
          if (bytes != in[a]->nbytes())
            throw Error("reinterpreting " + shape_str(in[a]->shape()) + " as " + shape_str(d.shape) + " changes the element count");
          *out[i] = Tensor::alias(*in[a], d.dtype, d.shape, const_cast<void*>(in[a]->raw()));
          continue;
        }
        if (a >= 0 && in[a]) {  // a graph output must own its bytes: copy
          *out[i] = Tensor::alias(*in[a], d.dtype, d.shape, const_cast<void*>(in[a]->raw())).clone();
          continue;
        }
        aliased_only = false;
        if (o >= 0 && plan && plan->offset[o] >= 0 && (as_planned || same_desc(plan->descs[o], d))) {
          if (!same_view(*out[i], arena + plan->offset[o], d)) *out[i] = Tensor::view(d.dtype, d.shape, arena + plan->offset[o]);
        } else {
          *out[i] = Tensor::empty(d.dtype, d.shape);
        }
      }
      if (!aliased_only) st.kernel->run(in, out);
    }
  } catch (const Error& e) {
    throw Error(node_error(graph_, node, e.what()));
  } catch (const std::bad_alloc&) {
    throw Error(node_error(graph_, node, "out of memory"));
  }
  if (profiler) {
    TraceEvent e;
    e.name = graph_.label(node);
    e.op_type = node.op_type;
    e.shapes = describe_shapes(in, out);
    e.start_us = t0;
    e.duration_us = profiler->now_us() - t0;
    profiler->add(std::move(e));
  }
  if (record) {
    bool shape_only = !never_freeze(node);
    if (!reads_only_shape(node))
      for (int v : st.inputs) shape_only = shape_only && (v < 0 || record->shape_only[v]);
    for (int o : st.outputs) {
      if (o < 0) continue;
      record->descs[o] = TensorDesc{values[o].dtype(), values[o].shape()};
      if (shape_only && values[o].nbytes() <= kMaxFrozenBytes) {
        record->shape_only[o] = true;
        record->values[o] = values[o].clone();
      }
    }
  }
  release();
}

void Executor::reserve_arena(size_t bytes) {
  if (bytes <= arena_bytes_) return;
  arena_.reset();  // free the old one first: peak memory is the larger arena, not both
  size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw Error("out of memory: arena of " + std::to_string(bytes) + " bytes");
  // Touch every page now: the run that first uses the arena would otherwise pay its page faults
  // (the kernel zeroing each page) inside its kernels, and the second run of a shape, the first
  // one planned, was still Whisper-tiny's slowest by about 40 ms in the encoder and the prefill.
  for (size_t i = 0; i < rounded; i += 4096) static_cast<volatile char*>(p)[i] = 0;
  arena_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  arena_bytes_ = rounded;
}

std::vector<Tensor> Executor::run(const std::vector<Tensor>& inputs, Profiler* profiler) {
  std::vector<int64_t> signature;
  for (const Tensor& t : inputs) {
    signature.push_back(static_cast<int64_t>(t.dtype()));
    signature.push_back(static_cast<int64_t>(t.rank()));
    signature.insert(signature.end(), t.shape().begin(), t.shape().end());
  }
  std::vector<Tensor>& values = values_;
  auto it = plans_.find(signature);
  const ShapePlan* plan_now = it == plans_.end() ? nullptr : it->second.get();
  if (!plan_now || plan_now != resident_) {
    for (int v : computed_) values[v] = Tensor();
    resident_ = steady_ = nullptr;
  }
  for (size_t i = 0; i < inputs.size(); ++i) values[graph_.inputs[i]] = inputs[i];
  // What a run leaves behind: its plan's frozen values stay resident, everything else goes.
  auto clear_run = [&] {
    if (!resident_) {
      for (int v : computed_) values[v] = Tensor();
      return;
    }
    for (int v : graph_.inputs) values[v] = Tensor();
    for (int v : graph_.outputs) values[v] = Tensor();
  };

  if (it == plans_.end()) {
    // First run for these shapes: run on the heap while recording every shape, then plan.
    Recording record;
    record.descs.resize(graph_.values.size());
    record.values.resize(graph_.values.size());
    record.shape_only.assign(graph_.values.size(), false);
    record.view_of.assign(graph_.values.size(), -1);
    record.view_offset.assign(graph_.values.size(), 0);
    for (size_t v = 0; v < graph_.values.size(); ++v) record.shape_only[v] = graph_.values[v].is_constant;
    execute(values, nullptr, &record, profiler);
    // Bound the cache so a stream of new shapes cannot grow memory without limit (plans hold
    // offsets only; the one arena is shared).
    if (plans_.size() >= 64) plans_.erase(plans_.begin());  // never the resident one: there is none
    auto plan = std::make_unique<ShapePlan>(build_plan(record));
    reserve_arena(plan->arena_bytes);  // now, so the next run of these shapes is a steady one
    plans_[signature] = std::move(plan);
  } else {
    ShapePlan& plan = *it->second;
    reserve_arena(plan.arena_bytes);
    if (resident_ != &plan) {
      for (const auto& [v, t] : plan.frozen) values[v] = t;
      resident_ = &plan;
    }
    bool branches = branches_.worth_trying() && !profiler && inter_op_ != InterOp::kOff && num_threads() > 1;
    bool concurrent = branches && (inter_op_ == InterOp::kOn || plan.branch_tuner.use_alternative());
    // The spin team is timed once the branch question is settled, so the two trials never mix.
    bool team_trial = !profiler && !concurrent && num_threads() > 1 && !in_parallel_region() &&
                      (!branches || inter_op_ == InterOp::kOn || plan.branch_tuner.decided());
    // Timed only where no kernel hands work to oneDNN, which a team would leave one thread.
    bool team_timed = team_trial && spin_team_setting() == Setting::kAuto && !runs_onednn_;
    bool team = spin_team_setting() == Setting::kAuto ? team_timed && plan.team_tuner.use_alternative()
                                                      : team_trial && spin_team_setting() == Setting::kOn;
    auto t0 = std::chrono::steady_clock::now();
    bool stayed_steady = false;
    try {
      if (concurrent)
        execute_branches(values, plan);
      else if (team)
        run_with_spin_team(num_threads(), [&] { stayed_steady = execute(values, &plan, nullptr, nullptr); });
      else
        stayed_steady = execute(values, &plan, nullptr, profiler);
    } catch (...) {
      resident_ = steady_ = nullptr;  // a failed run's values are released in full
      clear_run();
      throw;
    }
    // Branch and profiled runs take the checked path every time.
    steady_ = !concurrent && !profiler && (stayed_steady || left_as_planned(plan, values)) ? &plan : nullptr;
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (branches && inter_op_ == InterOp::kAuto && !plan.branch_tuner.decided()) plan.branch_tuner.record(concurrent, ms);
    else if (team_timed && !plan.team_tuner.decided()) plan.team_tuner.record(team, ms);
  }
  std::vector<Tensor> outputs;
  for (int o : graph_.outputs) outputs.push_back(values[o]);
  clear_run();
  return outputs;
}

}  // namespace mminfer::runtime
