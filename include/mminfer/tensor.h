// Tensor: a typed, shaped view of memory that may own its storage.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mminfer {

// Values follow ONNX TensorProto.DataType so conversion is a cast.
enum class DType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUint8 = 2,
  kInt8 = 3,
  kUint16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUint32 = 12,
  kUint64 = 13,
  kBFloat16 = 16,
};

size_t dtype_size(DType t);          // bytes per element; 0 for undefined/string
const char* dtype_name(DType t);     // "float32", "int64", ...
DType dtype_from_name(const std::string& name);  // kUndefined when unknown

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);  // "1x3x224x224", "scalar" for rank 0

class Tensor {
 public:
  Tensor() = default;
  // Allocates zero-initialised, 64-byte aligned storage.
  static Tensor empty(DType dtype, Shape shape);
  // Wraps memory owned elsewhere; the caller keeps it alive.
  static Tensor view(DType dtype, Shape shape, void* data);
  // Shares storage with `owner` (keeps it alive) under a new dtype/shape.
  static Tensor alias(const Tensor& owner, DType dtype, Shape shape, void* data);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_[i]; }
  size_t rank() const { return shape_.size(); }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool defined() const { return dtype_ != DType::kUndefined; }

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  template <typename T>
  T* data() { return static_cast<T*>(data_); }
  template <typename T>
  const T* data() const { return static_cast<const T*>(data_); }

  Tensor clone() const;  // deep copy into owned storage

 private:
  DType dtype_ = DType::kUndefined;
  Shape shape_;
  void* data_ = nullptr;
  std::shared_ptr<void> storage_;
};

}  // namespace mminfer
