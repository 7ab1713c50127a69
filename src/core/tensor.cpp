#include "mminfer/tensor.h"

#include <cstdlib>
#include <cstring>

#include "core/storage_pool.h"
#include "mminfer/status.h"

namespace mminfer {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFloat32: case DType::kInt32: case DType::kUint32: return 4;
    case DType::kUint8: case DType::kInt8: case DType::kBool: return 1;
    case DType::kUint16: case DType::kInt16: case DType::kFloat16: case DType::kBFloat16: return 2;
    case DType::kInt64: case DType::kFloat64: case DType::kUint64: return 8;
    default: return 0;
  }
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kUint8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kUint16: return "uint16";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kString: return "string";
    case DType::kBool: return "bool";
    case DType::kFloat16: return "float16";
    case DType::kFloat64: return "float64";
    case DType::kUint32: return "uint32";
    case DType::kUint64: return "uint64";
    case DType::kBFloat16: return "bfloat16";
    default: return "undefined";
  }
}

DType dtype_from_name(const std::string& n) {
  for (int i = 1; i <= 16; ++i) {
    DType t = static_cast<DType>(i);
    if (n == dtype_name(t)) return t;
  }
  return DType::kUndefined;
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) {
  if (s.empty()) return "scalar";
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += 'x';
    out += std::to_string(s[i]);
  }
  return out;
}

namespace {
// Guards against shapes whose element count overflows or is absurd before we allocate.
constexpr int64_t kMaxTensorBytes = int64_t(16) << 30;
}

Tensor Tensor::empty(DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error("tensor shape " + shape_str(shape) + " has a negative dimension");
    if (d != 0 && n > kMaxTensorBytes / d) throw Error("tensor shape " + shape_str(shape) + " is too large");
    n *= d;
  }
  size_t bytes = static_cast<size_t>(n) * dtype_size(dtype);
  if (static_cast<int64_t>(bytes) > kMaxTensorBytes)
    throw Error("tensor of " + std::to_string(bytes) + " bytes exceeds the 16 GiB limit");
  t.shape_ = std::move(shape);
  t.storage_ = allocate_storage(bytes);
  if (!t.storage_) throw Error("out of memory allocating " + std::to_string(bytes) + " bytes");
  std::memset(t.storage_.get(), 0, (bytes + 63) / 64 * 64);  // the padding too, as before
  t.data_ = t.storage_.get();
  return t;
}

Tensor Tensor::view(DType dtype, Shape shape, void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = data;
  return t;
}

Tensor Tensor::alias(const Tensor& owner, DType dtype, Shape shape, void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = data;
  t.storage_ = owner.storage_;
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = empty(dtype_, shape_);
  if (nbytes()) std::memcpy(t.data_, data_, nbytes());
  return t;
}

}  // namespace mminfer
