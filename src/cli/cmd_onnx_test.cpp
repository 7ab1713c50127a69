// Runs ONNX backend test cases (model.onnx + test_data_set_*/{input,output}_*.pb).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <onnx/onnx_pb.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/half.h"
#include "mminfer/session.h"
#include "onnx/tensor_proto.h"

namespace fs = std::filesystem;

namespace mminfer::cli {

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw Error("cannot open " + p.string());
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Tensor read_pb(const fs::path& p) {
  onnx::TensorProto proto;
  if (!proto.ParseFromString(read_file(p))) throw Error("not a TensorProto: " + p.string());
  return onnx_io::tensor_from_proto(proto, p.parent_path().string());
}

double as_double(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat32: return t.data<float>()[i];
    case DType::kFloat64: return t.data<double>()[i];
    case DType::kFloat16: return half_to_float(t.data<uint16_t>()[i]);
    case DType::kBFloat16: return bf16_to_float(t.data<uint16_t>()[i]);
    case DType::kInt64: return static_cast<double>(t.data<int64_t>()[i]);
    case DType::kInt32: return t.data<int32_t>()[i];
    case DType::kInt16: return t.data<int16_t>()[i];
    case DType::kInt8: return t.data<int8_t>()[i];
    case DType::kUint8: case DType::kBool: return t.data<uint8_t>()[i];
    case DType::kUint16: return t.data<uint16_t>()[i];
    case DType::kUint32: return t.data<uint32_t>()[i];
    case DType::kUint64: return static_cast<double>(t.data<uint64_t>()[i]);
    default: return 0;
  }
}

bool is_float(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 || t == DType::kBFloat16;
}

// Empty string when equal within the ONNX suite's tolerances (rtol 1e-3, atol 1e-7).
std::string compare(const Tensor& got, const Tensor& want, const std::string& name) {
  if (got.dtype() != want.dtype())
    return name + ": dtype " + dtype_name(got.dtype()) + ", expected " + dtype_name(want.dtype());
  if (got.shape() != want.shape())
    return name + ": shape " + shape_str(got.shape()) + ", expected " + shape_str(want.shape());
  double max_err = 0;
  int64_t bad = -1;
  // Integers compare exactly, including int64 values beyond double's 53 bits.
  if (got.dtype() == DType::kInt64 || got.dtype() == DType::kUint64) {
    for (int64_t i = 0; i < got.numel(); ++i)
      if (got.data<int64_t>()[i] != want.data<int64_t>()[i]) {
        bad = i;
        break;
      }
    if (bad >= 0) return name + ": element " + std::to_string(bad) + " differs";
    return "";
  }
  for (int64_t i = 0; i < got.numel(); ++i) {
    double a = as_double(got, i), b = as_double(want, i);
    if (std::isnan(a) || std::isnan(b)) {
      if (std::isnan(a) != std::isnan(b)) {
        if (bad < 0) bad = i;
        max_err = INFINITY;
      }
      continue;
    }
    if (std::isinf(a) || std::isinf(b)) {
      if (a != b) {
        if (bad < 0) bad = i;
        max_err = INFINITY;
      }
      continue;
    }
    double err = std::fabs(a - b);
    double tol = is_float(got.dtype()) ? 1e-7 + 1e-3 * std::fabs(b) : 0.0;
    if (err > tol && bad < 0) bad = i;
    max_err = std::max(max_err, err);
  }
  if (bad >= 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf, ": max abs error %.3g (first mismatch at element %lld: got %.6g, expected %.6g)",
                  max_err, (long long)bad, as_double(got, bad), as_double(want, bad));
    return name + buf;
  }
  return "";
}

// The suite stores bfloat16 tensors as uint16 (NumPy has no bfloat16): same bits, other tag.
Tensor as_declared(const Tensor& t, DType declared) {
  if (declared == DType::kBFloat16 && t.dtype() == DType::kUint16)
    return Tensor::alias(t, DType::kBFloat16, t.shape(), const_cast<void*>(t.raw()));
  return t;
}

enum class Outcome { kPass, kFail, kSkip };

// An unsupported feature is a skip with its reason; anything else that goes wrong is a failure.
bool is_unsupported(const std::string& msg) {
  return msg.find("not supported") != std::string::npos || msg.find("unsupported") != std::string::npos;
}

Outcome run_case(const fs::path& dir, std::string& detail) {
  SessionOptions opts;
  opts.threads = 0;
  std::unique_ptr<Session> session;
  Status st = Session::load((dir / "model.onnx").string(), opts, &session);
  if (!st) {
    detail = st.message();
    return is_unsupported(detail) ? Outcome::kSkip : Outcome::kFail;
  }
  std::vector<fs::path> sets;
  for (auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) {
    detail = "no test_data_set_* folders";
    return Outcome::kSkip;
  }
  for (const fs::path& set : sets) {
    std::vector<NamedTensor> inputs;
    for (size_t i = 0;; ++i) {
      fs::path p = set / ("input_" + std::to_string(i) + ".pb");
      if (!fs::exists(p)) break;
      if (i >= session->inputs().size()) {
        detail = "test data has more inputs than the model";
        return Outcome::kFail;
      }
      inputs.emplace_back(session->inputs()[i].name, as_declared(read_pb(p), session->inputs()[i].dtype));
    }
    std::vector<Tensor> outputs;
    st = session->run(inputs, &outputs);
    if (!st) {
      detail = st.message();
      return is_unsupported(detail) ? Outcome::kSkip : Outcome::kFail;
    }
    for (size_t i = 0;; ++i) {
      fs::path p = set / ("output_" + std::to_string(i) + ".pb");
      if (!fs::exists(p)) break;
      if (i >= outputs.size()) {
        detail = "model produced fewer outputs than expected";
        return Outcome::kFail;
      }
      std::string diff = compare(outputs[i], as_declared(read_pb(p), outputs[i].dtype()), session->outputs()[i].name);
      if (!diff.empty()) {
        detail = set.filename().string() + ": " + diff;
        return Outcome::kFail;
      }
    }
  }
  return Outcome::kPass;
}

void collect_cases(const fs::path& dir, std::vector<fs::path>& out) {
  if (fs::exists(dir / "model.onnx")) {
    out.push_back(dir);
    return;
  }
  if (!fs::is_directory(dir)) throw Error(dir.string() + " is neither a test case nor a folder of cases");
  std::vector<fs::path> subs;
  for (auto& e : fs::directory_iterator(dir))
    if (e.is_directory()) subs.push_back(e.path());
  std::sort(subs.begin(), subs.end());
  for (auto& s : subs) collect_cases(s, out);
}

}  // namespace

int cmd_onnx_test(int argc, char** argv) {
  Args args(argc, argv, 2, {"--min-pass-rate", "--filter", "--skip-list"}, {"--help", "--quiet"});
  if (args.has("--help") || args.positional().empty()) {
    std::fputs(
        "usage: mminfer onnx-test DIR... [--filter SUBSTRING] [--min-pass-rate 0.85] [--skip-list FILE] [--quiet]\n"
        "  --skip-list: lines of 'CASE REASON' to skip with that reason ('#' starts a comment)\n"
        "  each DIR is a case (model.onnx + test_data_set_*) or a folder of cases\n",
        args.usage_stream());
    return args.has("--help") ? 0 : 2;
  }
  std::vector<fs::path> cases;
  for (auto& d : args.positional()) collect_cases(d, cases);
  std::string filter = args.get("--filter");
  std::map<std::string, std::string> skip_reasons;
  if (args.has("--skip-list")) {
    std::istringstream lines(read_file(args.get("--skip-list")));
    std::string line;
    while (std::getline(lines, line)) {
      if (line.empty() || line[0] == '#') continue;
      size_t sp = line.find(' ');
      skip_reasons[line.substr(0, sp)] = sp == std::string::npos ? "listed" : line.substr(sp + 1);
    }
  }
  int passed = 0, failed = 0, skipped = 0;
  bool quiet = args.has("--quiet");
  for (auto& c : cases) {
    std::string name = c.filename().string();
    if (!filter.empty() && name.find(filter) == std::string::npos) continue;
    std::string detail;
    Outcome o;
    try {
      if (skip_reasons.count(name)) {
        detail = skip_reasons[name];
        o = Outcome::kSkip;
      } else {
        o = run_case(c, detail);
      }
    } catch (const std::exception& e) {
      detail = e.what();
      o = Outcome::kFail;
    }
    if (o == Outcome::kPass) {
      ++passed;
      if (!quiet) std::printf("pass %s\n", name.c_str());
    } else if (o == Outcome::kFail) {
      ++failed;
      std::printf("FAIL %s: %s\n", name.c_str(), detail.c_str());
    } else {
      ++skipped;
      if (!quiet) std::printf("skip %s: %s\n", name.c_str(), detail.c_str());
    }
    std::fflush(stdout);
  }
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  int total = passed + failed + skipped;
  if (args.has("--min-pass-rate") && total > 0) {
    double need = std::stod(args.get("--min-pass-rate"));
    double rate = static_cast<double>(passed) / total;
    std::printf("pass rate %.1f%% (required %.1f%%)\n", rate * 100, need * 100);
    if (rate < need) return 1;
  }
  return failed ? 1 : 0;
}

}  // namespace mminfer::cli
