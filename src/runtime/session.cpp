// The public Session: loads a model, validates inputs, runs the executor.
#include "mminfer/session.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "core/one_line.h"
#include "core/parallel.h"
#include "kernels/cpu/gemm/bf16_gemm.h"
#include "kernels/cpu/quantization/nbits_tiled.h"
#include "onnx/loader.h"
#include "onnx/nbits_weights_writer.h"
#include "passes/fix_branch_input.h"
#include "passes/pass.h"
#include "runtime/node_kernel.h"
#include "runtime/executor.h"
#include "runtime/profiler.h"
#include "runtime/session_factory.h"

namespace mminfer {

namespace {

ValueInfo info_of(const ir::Value& v) {
  ValueInfo info;
  info.name = v.name;
  info.dtype = v.dtype;
  info.has_shape = v.has_shape;
  if (v.has_shape) {
    info.dims = v.dims;
    info.symbols = v.symbols;
  }
  return info;
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec1, ec2;
  auto ca = std::filesystem::weakly_canonical(a, ec1), cb = std::filesystem::weakly_canonical(b, ec2);
  return !ec1 && !ec2 && ca == cb;
}

void drop_outputs(ir::Graph& g, const std::vector<std::string>& names) {
  std::vector<std::string> kept;
  for (int v : g.outputs)
    if (std::find(names.begin(), names.end(), g.values[v].name) == names.end()) kept.push_back(g.values[v].name);
  if (kept.size() < g.outputs.size()) ir::keep_outputs(g, kept);
}

class SessionImpl final : public Session {
 public:
  SessionImpl(onnx_io::LoadedModel model, const SessionOptions& options, const std::string& path)
      : options_(options) {
    ThreadScope threads(options.threads);  // kernels may size their packing by the thread count
    ir::Graph& g = model.graph;
    if (!options.outputs.empty()) ir::keep_outputs(g, options.outputs);
    if (!options.drop_outputs.empty()) drop_outputs(g, options.drop_outputs);
    for (int v : g.inputs) inputs_.push_back(info_of(g.values[v]));
    for (int v : g.outputs) outputs_.push_back(info_of(g.values[v]));
    // Observed values become extra outputs (after the model's own), which run() hands to the observer.
    if (options.observer && (options.observe_model.empty() || same_file(path, options.observe_model))) {
      for (const std::string& name : options.observe) {
        int v = g.find_value(name);
        if (v < 0 || g.values[v].is_constant) continue;
        if (g.values[v].is_graph_input) {
          for (size_t i = 0; i < g.inputs.size(); ++i)
            if (g.inputs[i] == v) observed_inputs_.emplace_back(name, i);
          continue;
        }
        size_t at = std::find(g.outputs.begin(), g.outputs.end(), v) - g.outputs.begin();
        if (at == g.outputs.size()) g.values[v].is_graph_output = true, g.outputs.push_back(v);
        observed_.emplace_back(name, at);
      }
    }
    passes::PassContext ctx;
    ctx.opt_level = options.opt_level;
    ctx.evaluate = runtime::evaluate_node;
    ctx.precision = options.precision;
    ctx.merge_tokens = options.merge_tokens;
    ctx.native_bf16 = kernels::Bf16Gemm::native();
    ctx.tile_nbits = kernels::nbits_tiled_cpu();
    passes::optimize(model.graph, ctx);
    if (options.profile || !options.profile_path.empty()) profiler_ = std::make_unique<runtime::Profiler>();
    max_executors_ = profiler_ ? 1 : std::max(1, options.max_concurrent_runs);
    if (max_executors_ > 1) graph_ = model.graph;  // a copy for the executors made later
    idle_.push_back(std::make_unique<runtime::Executor>(std::move(model.graph), options.inter_op));
    executors_made_ = 1;
  }
  ~SessionImpl() override {
    if (profiler_ && !options_.profile_path.empty()) {
      try {
        profiler_->write_chrome_trace(options_.profile_path);
      } catch (const std::exception&) {
        // Nothing to report to from a destructor; the CLI writes the trace explicitly first.
      }
    }
  }

  std::vector<OpTime> op_times(bool reset) override {
    std::vector<OpTime> out;
    if (!profiler_) return out;
    ExecutorLease quiet(*this);  // a profiled session has one executor: holding it keeps runs out
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& t : profiler_->totals(window_start_))
      out.push_back({t.op_type, static_cast<double>(t.total_us) / 1000.0, t.calls});
    if (reset) window_start_ = profiler_->events().size();
    return out;
  }

  const std::vector<ValueInfo>& inputs() const override { return inputs_; }
  const std::vector<ValueInfo>& outputs() const override { return outputs_; }

  Status run(const std::vector<NamedTensor>& named, std::vector<Tensor>* outputs) override {
    Status s = run_checked(named, outputs);
    return s.is_ok() ? s : Status::error(one_line(s.message()));  // names from the file may hold any bytes
  }

  Status run(const std::vector<NamedTensor>& named, const std::vector<std::string>& output_names,
             std::vector<Tensor>* outputs) override {
    Status s = run_selected(named, output_names, outputs);
    return s.is_ok() ? s : Status::error(one_line(s.message()));
  }

 private:
  // Hands out an idle executor, makes another while fewer than max_executors_ exist, else waits.
  class ExecutorLease {
   public:
    explicit ExecutorLease(SessionImpl& s) : s_(s) {
      std::unique_lock<std::mutex> lock(s.mutex_);
      s.executor_free_.wait(lock, [&] { return !s.idle_.empty() || s.executors_made_ < s.max_executors_; });
      if (!s.idle_.empty()) {
        executor_ = std::move(s.idle_.back());
        s.idle_.pop_back();
        return;
      }
      ++s.executors_made_;
      lock.unlock();
      try {
        executor_ = std::make_unique<runtime::Executor>(s.graph_, s.options_.inter_op);
      } catch (...) {
        lock.lock();
        --s.executors_made_;
        s.executor_free_.notify_one();
        throw;
      }
    }
    ~ExecutorLease() {
      std::lock_guard<std::mutex> lock(s_.mutex_);
      s_.idle_.push_back(std::move(executor_));
      s_.executor_free_.notify_one();
    }
    runtime::Executor& operator*() { return *executor_; }

   private:
    SessionImpl& s_;
    std::unique_ptr<runtime::Executor> executor_;
  };

  Status run_selected(const std::vector<NamedTensor>& named, const std::vector<std::string>& names,
                      std::vector<Tensor>* outputs) {
    if (names.empty() && std::none_of(outputs->begin(), outputs->end(), [](const Tensor& t) { return t.defined(); }))
      return run_checked(named, outputs);
    std::vector<size_t> picked;
    if (names.empty()) {
      for (size_t i = 0; i < outputs_.size(); ++i) picked.push_back(i);
    } else {
      for (const std::string& name : names) {
        size_t i = 0;
        while (i < outputs_.size() && outputs_[i].name != name) ++i;
        if (i == outputs_.size())
          return Status::error("unknown output '" + name + "' (the model's outputs: " + names_of(outputs_) + ")");
        picked.push_back(i);
      }
    }
    if (outputs->size() > picked.size())
      return Status::error(std::to_string(outputs->size()) + " output buffers given for " + std::to_string(picked.size()) +
                           " outputs");
    std::vector<Tensor> all;
    Status s = run_checked(named, &all);
    if (!s) return s;
    // Check every caller buffer before writing any, so a mismatch leaves them all untouched.
    for (size_t k = 0; k < outputs->size(); ++k) {
      const Tensor& buffer = (*outputs)[k];
      const Tensor& result = all[picked[k]];
      if (!buffer.defined()) continue;
      if (buffer.dtype() != result.dtype() || buffer.shape() != result.shape())
        return Status::error("output buffer for '" + outputs_[picked[k]].name + "' is " + dtype_name(buffer.dtype()) + " " +
                             shape_str(buffer.shape()) + ", the model computes " + dtype_name(result.dtype()) + " " +
                             shape_str(result.shape()));
      if (buffer.dtype() == DType::kString) return Status::error("output '" + outputs_[picked[k]].name + "' holds strings: "
                                                                 "pass no buffer for it");
    }
    outputs->resize(picked.size());
    for (size_t k = 0; k < picked.size(); ++k) {
      Tensor& buffer = (*outputs)[k];
      if (buffer.defined()) std::memcpy(buffer.raw(), all[picked[k]].raw(), buffer.nbytes());
      else buffer = std::move(all[picked[k]]);
    }
    return Status::ok();
  }

  Status run_checked(const std::vector<NamedTensor>& named, std::vector<Tensor>* outputs) {
    try {
      std::vector<Tensor> ordered(inputs_.size());
      std::vector<bool> seen(inputs_.size(), false);
      for (const auto& [name, tensor] : named) {
        size_t i = 0;
        while (i < inputs_.size() && inputs_[i].name != name) ++i;
        if (i == inputs_.size()) return Status::error("unknown input '" + name + "' (the model's inputs: " + names_of(inputs_) + ")");
        if (seen[i]) return Status::error("input '" + name + "' given twice");
        seen[i] = true;
        Status s = check_input(inputs_[i], tensor);
        if (!s) return s;
        ordered[i] = tensor;
      }
      for (size_t i = 0; i < inputs_.size(); ++i)
        if (!seen[i]) return Status::error("missing input '" + inputs_[i].name + "'");
      ThreadScope threads(options_.threads);
      {
        ExecutorLease executor(*this);
        *outputs = (*executor).run(ordered, profiler_.get());
      }
      for (const auto& [name, i] : observed_inputs_) options_.observer(name, ordered[i]);
      for (const auto& [name, i] : observed_) options_.observer(name, (*outputs)[i]);
      outputs->resize(outputs_.size());
      return Status::ok();
    } catch (const Error& e) {
      return Status::error(e.what());
    } catch (const std::bad_alloc&) {
      return Status::error("out of memory");
    } catch (const std::exception& e) {
      return Status::error(std::string("internal error: ") + e.what());
    }
  }

  static std::string names_of(const std::vector<ValueInfo>& infos) {
    std::string s;
    for (auto& i : infos) s += (s.empty() ? "" : ", ") + i.name;
    return s;
  }

  static Status check_input(const ValueInfo& info, const Tensor& t) {
    if (!t.defined()) return Status::error("input '" + info.name + "' has no data");
    if (info.dtype != DType::kUndefined && t.dtype() != info.dtype)
      return Status::error("input '" + info.name + "' must be " + dtype_name(info.dtype) + ", got " + dtype_name(t.dtype()));
    if (info.has_shape) {
      if (t.rank() != info.dims.size())
        return Status::error("input '" + info.name + "' must have rank " + std::to_string(info.dims.size()) + ", got shape " +
                             shape_str(t.shape()));
      for (size_t d = 0; d < info.dims.size(); ++d)
        if (info.dims[d] >= 0 && t.dim(d) != info.dims[d])
          return Status::error("input '" + info.name + "' dimension " + std::to_string(d) + " must be " +
                               std::to_string(info.dims[d]) + ", got " + std::to_string(t.dim(d)));
    }
    return Status::ok();
  }

  SessionOptions options_;
  std::vector<ValueInfo> inputs_, outputs_;
  std::vector<std::pair<std::string, size_t>> observed_, observed_inputs_;  // name, executor output / input index
  std::unique_ptr<runtime::Profiler> profiler_;
  size_t window_start_ = 0;  // first profiler event counted by op_times
  // Executors (kernels, plans, arena): one per run in flight, made on first need up to the cap.
  ir::Graph graph_;  // the optimized graph new executors are made from (kept when the cap is > 1)
  int max_executors_ = 1;
  int executors_made_ = 0;
  std::vector<std::unique_ptr<runtime::Executor>> idle_;
  std::mutex mutex_;
  std::condition_variable executor_free_;
};

Status make_session(onnx_io::LoadedModel model, const SessionOptions& options, std::unique_ptr<Session>* out,
                    const std::string& path = "") {
  *out = std::make_unique<SessionImpl>(std::move(model), options, path);
  return Status::ok();
}

Status load_checked(const std::string& path, const SessionOptions& options, std::unique_ptr<Session>* out) {
  try {
    return make_session(onnx_io::load_model_file(path), options, out, path);
  } catch (const Error& e) {
    return Status::error(e.what());
  } catch (const std::bad_alloc&) {
    return Status::error("out of memory loading " + path);
  } catch (const std::exception& e) {
    return Status::error(std::string("cannot load model: ") + e.what());
  }
}

Status load_bytes_checked(const std::string& bytes, const std::string& base_dir, const SessionOptions& options,
                          std::unique_ptr<Session>* out) {
  try {
    return make_session(onnx_io::load_model(bytes, base_dir), options, out);
  } catch (const Error& e) {
    return Status::error(e.what());
  } catch (const std::bad_alloc&) {
    return Status::error("out of memory loading model");
  } catch (const std::exception& e) {
    return Status::error(std::string("cannot load model: ") + e.what());
  }
}

}  // namespace

std::unique_ptr<Session> runtime::session_from_model(onnx_io::LoadedModel model, const SessionOptions& options,
                                                     const std::string& path) {
  return std::make_unique<SessionImpl>(std::move(model), options, path);
}

onnx_io::LoadedModel runtime::load_decoder_model(const std::string& path, const PrecisionPolicy& precision) {
  if (precision.decoder_weight_bits == 0) return onnx_io::load_model_file(path);
  onnx_io::NBitsOptions opt;
  opt.bits = precision.decoder_weight_bits;
  opt.block_size = precision.decoder_weight_block;
  return onnx_io::load_model_file(path, [&](onnx::ModelProto& model, const std::string& base_dir) {
    onnx_io::write_nbits_weights(model, opt, base_dir, precision.keep_fp32);
  });
}

std::unique_ptr<Session> runtime::load_session_fixing_branch(const std::string& path, const SessionOptions& options,
                                                             const std::string& branch_input, bool value) {
  try {
    onnx_io::LoadedModel model = load_decoder_model(path, options.precision);
    passes::fix_branch_input(model.graph, branch_input, value);
    return std::make_unique<SessionImpl>(std::move(model), options, path);
  } catch (const Error& e) {
    throw Error(one_line(path + ": " + e.what()));
  }
}

// Messages quote names from the file, which may hold any bytes: keep them one printable line.
Status Session::load(const std::string& path, const SessionOptions& options, std::unique_ptr<Session>* out) {
  Status s = load_checked(path, options, out);
  return s.is_ok() ? s : Status::error(one_line(s.message()));
}

Status Session::load_from_bytes(const std::string& bytes, const std::string& base_dir, const SessionOptions& options,
                                std::unique_ptr<Session>* out) {
  Status s = load_bytes_checked(bytes, base_dir, options, out);
  return s.is_ok() ? s : Status::error(one_line(s.message()));
}

}  // namespace mminfer
