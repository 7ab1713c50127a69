#include "cli/tensor_inputs.h"

#include "cli/args.h"
#include "core/half.h"
#include "core/npy.h"
#include "mminfer/status.h"

namespace mminfer::cli {

Shape parse_shape(const std::string& s, const std::string& what) {
  Shape shape;
  if (s.empty() || s == "scalar") return shape;
  size_t start = 0;
  while (true) {
    size_t x = s.find_first_of("x,", start);
    std::string tok = s.substr(start, x == std::string::npos ? std::string::npos : x - start);
    try {
      size_t pos = 0;
      long long v = std::stoll(tok, &pos);
      if (pos != tok.size() || v < 0) throw std::invalid_argument("bad");
      shape.push_back(v);
    } catch (const std::logic_error&) {
      throw Error(what + ": bad shape '" + s + "' (expected e.g. 1x3x224x224)");
    }
    if (x == std::string::npos) break;
    start = x + 1;
  }
  return shape;
}

Tensor random_tensor(DType dtype, const Shape& shape, const IntRange& range, std::mt19937_64& rng) {
  Tensor t = Tensor::empty(dtype, shape);
  int64_t n = t.numel();
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_int_distribution<int64_t> uni(range.lo, std::max(range.lo, range.hi - 1));
  switch (dtype) {
    case DType::kFloat32: for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = normal(rng); break;
    case DType::kFloat64: for (int64_t i = 0; i < n; ++i) t.data<double>()[i] = normal(rng); break;
    case DType::kFloat16: for (int64_t i = 0; i < n; ++i) t.data<uint16_t>()[i] = float_to_half(normal(rng)); break;
    case DType::kInt64: for (int64_t i = 0; i < n; ++i) t.data<int64_t>()[i] = uni(rng); break;
    case DType::kInt32: for (int64_t i = 0; i < n; ++i) t.data<int32_t>()[i] = static_cast<int32_t>(uni(rng)); break;
    case DType::kInt8: for (int64_t i = 0; i < n; ++i) t.data<int8_t>()[i] = static_cast<int8_t>(uni(rng)); break;
    case DType::kUint8: for (int64_t i = 0; i < n; ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(uni(rng)); break;
    case DType::kBool: for (int64_t i = 0; i < n; ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(rng() & 1); break;
    default: throw Error(std::string("cannot make random inputs of dtype ") + dtype_name(dtype));
  }
  return t;
}

namespace {

bool fixed_shape(const ValueInfo& info) {
  bool fixed = info.has_shape;
  for (int64_t d : info.dims) fixed = fixed && d >= 0;
  return fixed;
}

}  // namespace

std::string first_symbolic_input(const Session& session) {
  for (const ValueInfo& info : session.inputs()) {
    if (fixed_shape(info)) continue;
    std::string dims;
    for (size_t i = 0; i < info.dims.size(); ++i) {
      std::string d = info.dims[i] >= 0 ? std::to_string(info.dims[i])
                      : i < info.symbols.size() && !info.symbols[i].empty() ? info.symbols[i] : "?";
      dims += (i ? ", " : "") + d;
    }
    return "'" + info.name + "' " + (info.has_shape ? "[" + dims + "]" : "(no shape)");
  }
  return "";
}

std::vector<NamedTensor> model_inputs(const Args& args, const Session& session, const std::string& needed_by) {
  std::map<std::string, Tensor> given;
  std::map<std::string, Shape> shapes;
  std::map<std::string, IntRange> ranges;
  for (auto& s : args.all("--input")) {
    auto [n, p] = split_assignment(s, "--input");
    given[n] = read_npy(p);
  }
  for (auto& s : args.all("--shape")) {
    auto [n, v] = split_assignment(s, "--shape");
    shapes[n] = parse_shape(v, "--shape " + n);
  }
  for (auto& s : args.all("--int-range")) {
    auto [n, v] = split_assignment(s, "--int-range");
    size_t colon = v.find(':');
    try {
      if (colon == std::string::npos) throw std::invalid_argument("");
      ranges[n] = IntRange{std::stoll(v.substr(0, colon)), std::stoll(v.substr(colon + 1))};
    } catch (const std::logic_error&) {
      throw Error("--int-range expects NAME=LO:HI, got '" + s + "'");
    }
    if (ranges[n].hi <= ranges[n].lo) throw Error("--int-range " + n + ": HI must be above LO");
  }
  std::mt19937_64 rng(1234);
  std::vector<NamedTensor> inputs;
  for (const ValueInfo& info : session.inputs()) {
    if (given.count(info.name)) {
      inputs.emplace_back(info.name, given[info.name]);
      continue;
    }
    Shape shape;
    if (shapes.count(info.name)) {
      shape = shapes[info.name];
    } else {
      if (!fixed_shape(info))
        throw Error("input '" + info.name + "' has a symbolic shape; " +
                    (needed_by.empty() ? "" : needed_by + " needs a concrete one: ") + "give it with --shape " + info.name +
                    "=AxB... or --input " + info.name + "=F.npy");
      shape = info.dims;
    }
    DType dt = info.dtype == DType::kUndefined ? DType::kFloat32 : info.dtype;
    inputs.emplace_back(info.name, random_tensor(dt, shape, ranges.count(info.name) ? ranges[info.name] : IntRange{}, rng));
  }
  for (auto& [n, t] : given) {
    bool known = false;
    for (auto& i : session.inputs()) known = known || i.name == n;
    if (!known) throw Error("unknown input '" + n + "'");
  }
  return inputs;
}

}  // namespace mminfer::cli
