#include "kernels/cpu/common/kernel.h"

#include "core/half.h"

namespace mminfer::kernels {

void fail(const std::string& message) { throw Error(message); }

const Tensor& need_input(const Inputs& in, size_t i, const char* what) {
  if (i >= in.size() || in[i] == nullptr || !in[i]->defined())
    fail(std::string("missing required input ") + std::to_string(i) + " (" + what + ")");
  return *in[i];
}

int64_t normalize_axis(int64_t axis, int64_t rank, const char* what) {
  int64_t lo = rank == 0 ? -1 : -rank, hi = rank == 0 ? 0 : rank - 1;
  if (axis < lo || axis > hi)
    fail(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + std::max<int64_t>(rank, 1) : axis;
}

std::vector<int64_t> read_int_tensor(const Tensor& t, const char* what) {
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::kInt64) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = t.data<int64_t>()[i];
  } else if (t.dtype() == DType::kInt32) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = t.data<int32_t>()[i];
  } else {
    fail(std::string(what) + " must be int32 or int64, got " + dtype_name(t.dtype()));
  }
  return out;
}

double read_scalar(const Tensor& t, const char* what) {
  if (t.numel() < 1) fail(std::string(what) + " is empty");
  switch (t.dtype()) {
    case DType::kFloat32: return t.data<float>()[0];
    case DType::kFloat64: return t.data<double>()[0];
    case DType::kFloat16: return half_to_float(t.data<uint16_t>()[0]);
    case DType::kBFloat16: return bf16_to_float(t.data<uint16_t>()[0]);
    case DType::kInt64: return static_cast<double>(t.data<int64_t>()[0]);
    case DType::kInt32: return t.data<int32_t>()[0];
    case DType::kInt16: return t.data<int16_t>()[0];
    case DType::kInt8: return t.data<int8_t>()[0];
    case DType::kUint8: case DType::kBool: return t.data<uint8_t>()[0];
    case DType::kUint16: return t.data<uint16_t>()[0];
    case DType::kUint32: return t.data<uint32_t>()[0];
    case DType::kUint64: return static_cast<double>(t.data<uint64_t>()[0]);
    default: fail(std::string(what) + " has non-numeric dtype " + dtype_name(t.dtype()));
  }
}

}  // namespace mminfer::kernels
