// Loads an ONNX model, lists its inputs and outputs, runs it once on made-up inputs and prints
// each output's shape and sum:  run_model MODEL [NAME=DIMS ...] [--threads N]
// DIMS such as 1x3x224x224 fix an input's shape; symbolic dimensions not given become 1.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <mminfer/session.h>
#include <mminfer/version.h>

namespace {

std::vector<int64_t> parse_dims(const std::string& text) {
  std::vector<int64_t> dims;
  size_t from = 0;
  while (from <= text.size()) {
    size_t x = text.find('x', from);
    dims.push_back(std::stoll(text.substr(from, x - from)));
    if (x == std::string::npos) break;
    from = x + 1;
  }
  return dims;
}

// Deterministic values: a slow sine for floats, small counts for integers.
mminfer::Tensor made_up(const mminfer::ValueInfo& info, const std::vector<int64_t>& shape) {
  mminfer::Tensor t = mminfer::Tensor::empty(info.dtype, shape);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (info.dtype == mminfer::DType::kFloat32) t.data<float>()[i] = std::sin(0.01f * static_cast<float>(i));
    else if (info.dtype == mminfer::DType::kInt64) t.data<int64_t>()[i] = i % 7;
    else if (info.dtype == mminfer::DType::kInt32) t.data<int32_t>()[i] = static_cast<int32_t>(i % 7);
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: run_model MODEL [NAME=DIMS ...] [--threads N]\n");
    return 2;
  }
  mminfer::SessionOptions options;
  std::map<std::string, std::vector<int64_t>> shapes;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) options.threads = std::atoi(argv[++i]);
    else if (size_t eq = arg.find('='); eq != std::string::npos) shapes[arg.substr(0, eq)] = parse_dims(arg.substr(eq + 1));
  }
  std::unique_ptr<mminfer::Session> session;
  if (mminfer::Status s = mminfer::Session::load(argv[1], options, &session); !s) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return 1;
  }
  std::printf("mminfer %s\n", mminfer::version());
  std::vector<mminfer::NamedTensor> inputs;
  for (const mminfer::ValueInfo& in : session->inputs()) {
    std::vector<int64_t> shape = shapes.count(in.name) ? shapes[in.name] : in.dims;
    for (int64_t& d : shape) d = d < 0 ? 1 : d;
    std::printf("input %s %s %s\n", in.name.c_str(), mminfer::dtype_name(in.dtype), mminfer::shape_str(shape).c_str());
    inputs.emplace_back(in.name, made_up(in, shape));
  }
  std::vector<mminfer::Tensor> outputs;
  if (mminfer::Status s = session->run(inputs, &outputs); !s) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return 1;
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    double sum = 0;
    if (outputs[o].dtype() == mminfer::DType::kFloat32)
      for (int64_t i = 0; i < outputs[o].numel(); ++i) sum += outputs[o].data<float>()[i];
    std::printf("output %s %s sum %.6g\n", session->outputs()[o].name.c_str(), mminfer::shape_str(outputs[o].shape()).c_str(),
                sum);
  }
  return 0;
}
