#include "cli/precision_guard.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/cosine.h"
#include "core/json_string.h"

namespace mminfer::cli {

namespace {

std::vector<Tensor> run_session(Session& session, const std::vector<NamedTensor>& inputs) {
  std::vector<Tensor> out;
  if (Status st = session.run(inputs, &out); !st) throw Error(st.message());
  return out;
}

// The trial file, as the file says: activations quantized per tensor.
std::vector<std::vector<Tensor>> run_trial(const std::string& path, int threads,
                                           const std::vector<std::vector<NamedTensor>>& inputs) {
  SessionOptions opts;
  opts.threads = threads;
  opts.precision.int8_per_tensor = true;
  std::unique_ptr<Session> session;
  if (Status st = Session::load(path, opts, &session); !st) throw Error(st.message());
  std::vector<std::vector<Tensor>> out;
  for (const auto& set : inputs) out.push_back(run_session(*session, set));
  return out;
}

// One output's accuracy over several runs: the worst minimum and error, the mean of the means.
OutputAccuracy merge(const std::vector<OutputAccuracy>& runs) {
  OutputAccuracy m = runs.front();
  m.mean_cosine = 0;
  for (const OutputAccuracy& r : runs) {
    m.min_cosine = std::min(m.min_cosine, r.min_cosine);
    m.max_abs_error = std::max(m.max_abs_error, r.max_abs_error);
    m.mean_cosine += r.mean_cosine / static_cast<double>(runs.size());
  }
  return m;
}

// Cosine per row of the first axis (the whole tensor when rank < 2) and the largest error.
OutputAccuracy compare(const std::string& name, const Tensor& got, const Tensor& want) {
  OutputAccuracy a;
  a.name = name;
  if (got.shape() != want.shape()) throw Error("output '" + name + "' changed shape under INT8");
  if (want.dtype() != DType::kFloat32 || got.dtype() != DType::kFloat32) return a;  // not a float output
  int64_t rows = want.rank() >= 2 ? want.dim(0) : 1, cols = rows ? want.numel() / std::max<int64_t>(rows, 1) : 0;
  double sum = 0;
  a.min_cosine = 1;
  for (int64_t r = 0; r < rows; ++r) {
    std::span<const float> x(got.data<float>() + r * cols, static_cast<size_t>(cols));
    std::span<const float> y(want.data<float>() + r * cols, static_cast<size_t>(cols));
    for (size_t c = 0; c < x.size(); ++c)
      a.max_abs_error = std::max(a.max_abs_error, std::fabs(static_cast<double>(x[c]) - y[c]));
    const double cos = cosine_similarity(x, y);
    a.min_cosine = std::min(a.min_cosine, cos);
    sum += cos;
  }
  a.mean_cosine = rows ? sum / static_cast<double>(rows) : 1;
  return a;
}

double worst(const std::vector<OutputAccuracy>& outs) {
  double w = 1;
  for (const auto& o : outs) w = std::min(w, o.min_cosine);
  return w;
}

}  // namespace

PrecisionGuard::PrecisionGuard(const onnx::ModelProto& model, const std::string& path, Session& fp32,
                     std::vector<std::vector<NamedTensor>> inputs, int threads, Int8Writer writer)
    : model_(model), writer_(std::move(writer)), inputs_(std::move(inputs)), threads_(threads) {
  if (inputs_.empty()) throw Error("no evaluation inputs");
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  base_dir_ = dir.empty() ? "." : dir.string();
  for (const auto& set : inputs_) reference_.push_back(run_session(fp32, set));
  for (const ValueInfo& v : fp32.outputs()) names_.push_back(v.name);
}

onnx::ModelProto PrecisionGuard::write(const std::set<std::string>& layers) const {
  onnx::ModelProto m = model_;
  writer_(m, layers);
  return m;
}

std::vector<OutputAccuracy> PrecisionGuard::measure(const std::set<std::string>& layers) {
  // Beside the source, so that external data paths still resolve.
  std::string tmp = (std::filesystem::path(base_dir_) / (".mminfer-guard-" + std::to_string(getpid()) + ".onnx")).string();
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f || !write(layers).SerializeToOstream(&f)) throw Error("cannot write a trial model next to the source: " + tmp);
  }
  std::vector<std::vector<Tensor>> got;
  try {
    got = run_trial(tmp, threads_, inputs_);
  } catch (...) {
    std::filesystem::remove(tmp);
    throw;
  }
  std::filesystem::remove(tmp);
  std::vector<OutputAccuracy> out;
  for (size_t o = 0; o < names_.size(); ++o) {
    std::vector<OutputAccuracy> runs;
    for (size_t r = 0; r < got.size(); ++r) runs.push_back(compare(names_[o], got[r][o], reference_[r][o]));
    out.push_back(merge(runs));
  }
  return out;
}

GuardReport PrecisionGuard::choose(const std::vector<std::string>& layers, double min_cosine, bool sensitivity) {
  GuardReport r;
  auto step = [&](const char* stage, size_t done, size_t total) {
    if (steps_) steps_(stage, done, total);
  };
  std::set<std::string> chosen(layers.begin(), layers.end());
  step("accuracy check", 0, 1);
  r.outputs = measure(chosen);
  r.min_cosine = worst(r.outputs);
  step("accuracy check", 1, 1);
  bool fall_back = min_cosine > 0 && r.min_cosine < min_cosine;
  if (sensitivity || fall_back) {
    step("layer sensitivity", 0, layers.size());
    for (const std::string& l : layers) {
      r.sensitivity.emplace_back(l, worst(measure({l})));
      step("layer sensitivity", r.sensitivity.size(), layers.size());
    }
    std::stable_sort(r.sensitivity.begin(), r.sensitivity.end(), [](auto& a, auto& b) { return a.second < b.second; });
  }
  // At most every layer falls back; the bar counts against that bound.
  for (size_t i = 0; fall_back && i < r.sensitivity.size(); ++i) {
    step("falling back to FP32", i, r.sensitivity.size());
    chosen.erase(r.sensitivity[i].first);
    r.fp32_fallback.push_back(r.sensitivity[i].first);
    r.outputs = measure(chosen);
    r.min_cosine = worst(r.outputs);
    fall_back = r.min_cosine < min_cosine;
  }
  for (const std::string& l : layers)
    if (chosen.count(l)) r.int8.push_back(l);
  return r;
}

std::string GuardReport::to_json() const {
  auto num = [](double x) {
    char b[32];
    std::snprintf(b, sizeof b, "%.7g", x);
    return std::string(b);
  };
  auto names = [](const std::vector<std::string>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", \"" : "\"") + json_escape(v[i]) + "\"";
    return s + "]";
  };
  std::string s = "{\"min_cosine\": " + num(min_cosine) + ", \"outputs\": [";
  for (size_t i = 0; i < outputs.size(); ++i)
    s += std::string(i ? ", " : "") + "{\"name\": \"" + json_escape(outputs[i].name) + "\", \"min_cosine\": " +
         num(outputs[i].min_cosine) + ", \"mean_cosine\": " + num(outputs[i].mean_cosine) +
         ", \"max_abs_error\": " + num(outputs[i].max_abs_error) + "}";
  std::vector<std::string> in_int8, in_fp16;
  for (const std::string& l : int8) {
    auto p = precision.find(l);
    (p != precision.end() && p->second == "fp16" ? in_fp16 : in_int8).push_back(l);
  }
  s += "], \"int8_layers\": " + names(in_int8) + ", \"fp16_layers\": " + names(in_fp16) +
       ", \"fp32_fallback\": " + names(fp32_fallback) + ", \"sensitivity\": [";
  for (size_t i = 0; i < sensitivity.size(); ++i)
    s += std::string(i ? ", " : "") + "{\"layer\": \"" + json_escape(sensitivity[i].first) +
         "\", \"min_cosine_alone\": " + num(sensitivity[i].second) + "}";
  return s + "]}";
}

}  // namespace mminfer::cli
