#include "robust_util.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace robust {

using mminfer::DType;
using mminfer::Tensor;

std::string status_problem(const mminfer::Status& s, const std::string& must_mention) {
  if (s.is_ok()) return "";
  const std::string& m = s.message();
  if (m.empty()) return "error with an empty message";
  if (m.find('\n') != std::string::npos || m.find('\r') != std::string::npos)
    return "error message spans several lines: " + m;
  if (!must_mention.empty() && m.find(must_mention) == std::string::npos)
    return "error message does not mention '" + must_mention + "': " + m;
  return "";
}

bool small_inputs(const mminfer::Session& session, Rng& rng, int64_t symbolic_dim,
                  std::vector<mminfer::NamedTensor>* out) {
  constexpr int64_t kMaxElements = 1 << 14;
  out->clear();
  for (const mminfer::ValueInfo& info : session.inputs()) {
    if (!info.has_shape) return false;
    mminfer::Shape shape;
    int64_t n = 1;
    for (int64_t d : info.dims) {
      int64_t v = d < 0 ? symbolic_dim : d;
      if (v > kMaxElements) return false;
      shape.push_back(v);
      n *= v;
      if (n > kMaxElements) return false;
    }
    DType dt = info.dtype == DType::kUndefined ? DType::kFloat32 : info.dtype;
    if (mminfer::dtype_size(dt) == 0) return false;
    Tensor t = Tensor::empty(dt, shape);
    for (int64_t i = 0; i < n; ++i) {
      uint64_t r = rng.next();
      switch (dt) {
        case DType::kFloat32: t.data<float>()[i] = static_cast<float>(static_cast<int64_t>(r % 2001) - 1000) / 500.f; break;
        case DType::kFloat64: t.data<double>()[i] = static_cast<double>(static_cast<int64_t>(r % 2001) - 1000) / 500.0; break;
        case DType::kInt64: t.data<int64_t>()[i] = static_cast<int64_t>(r % 3); break;
        case DType::kInt32: t.data<int32_t>()[i] = static_cast<int32_t>(r % 3); break;
        default: break;  // zeros are a fine value for every other dtype
      }
    }
    out->emplace_back(info.name, std::move(t));
  }
  return true;
}

Outcome load_and_run(const std::string& bytes, const std::string& base_dir) {
  Outcome o;
  mminfer::SessionOptions opts;
  opts.threads = 1;
  std::unique_ptr<mminfer::Session> session;
  mminfer::Status s = mminfer::Session::load_from_bytes(bytes, base_dir, opts, &session);
  o.problem = status_problem(s);
  if (!o.problem.empty()) {
    o.problem = "load: " + o.problem;
    return o;
  }
  if (!s.is_ok()) return o;
  if (!session) {
    o.problem = "load succeeded without a session";
    return o;
  }
  o.loaded = true;
  Rng rng(bytes.size());
  std::vector<mminfer::NamedTensor> inputs;
  if (!small_inputs(*session, rng, 2, &inputs)) return o;
  std::vector<Tensor> outputs;
  s = session->run(inputs, &outputs);
  o.problem = status_problem(s);
  if (!o.problem.empty()) {
    o.problem = "run: " + o.problem;
    return o;
  }
  if (s.is_ok()) {
    o.ran = true;
    if (outputs.size() != session->outputs().size()) o.problem = "run returned the wrong number of outputs";
  }
  return o;
}

TempDir::TempDir(const std::string& tag) {
  static std::atomic<int> counter{0};
  auto base = std::filesystem::temp_directory_path() /
              ("mminfer-robust-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(base);
  std::filesystem::create_directories(base);
  path_ = base.string();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace robust
