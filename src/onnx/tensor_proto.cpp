#include "onnx/tensor_proto.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "mminfer/status.h"

namespace mminfer::onnx_io {

namespace {

std::string label(const onnx::TensorProto& p) { return "tensor '" + p.name() + "'"; }

std::string read_external(const onnx::TensorProto& p, const std::string& base_dir, size_t expected) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : p.external_data()) {
    try {
      if (kv.key() == "location") location = kv.value();
      else if (kv.key() == "offset") offset = std::stoll(kv.value());
      else if (kv.key() == "length") length = std::stoll(kv.value());
    } catch (const std::logic_error&) {
      throw Error(label(p) + ": external data '" + kv.key() + "' is not a number");
    }
  }
  if (location.empty()) throw Error(label(p) + ": external data has no location");
  std::filesystem::path rel(location);
  // A model may only read files beside it: no absolute paths, no climbing out.
  if (rel.is_absolute()) throw Error(label(p) + ": external data path '" + location + "' is absolute");
  for (const auto& part : rel)
    if (part == "..") throw Error(label(p) + ": external data path '" + location + "' leaves the model folder");
  std::filesystem::path full = std::filesystem::path(base_dir) / rel;
  // Symlinks may still lead out of the folder: compare the resolved paths.
  std::error_code ec;
  auto real_dir = std::filesystem::canonical(base_dir, ec);
  auto real_file = ec ? std::filesystem::path() : std::filesystem::canonical(full, ec);
  if (ec) throw Error(label(p) + ": cannot open external data file " + full.string());
  auto [d, f_it] = std::mismatch(real_dir.begin(), real_dir.end(), real_file.begin(), real_file.end());
  if (d != real_dir.end())
    throw Error(label(p) + ": external data path '" + location + "' resolves outside the model folder");
  if (!std::filesystem::is_regular_file(real_file, ec))
    throw Error(label(p) + ": external data path '" + location + "' is not a regular file");
  std::ifstream f(full, std::ios::binary);
  if (!f) throw Error(label(p) + ": cannot open external data file " + full.string());
  f.seekg(0, std::ios::end);
  int64_t size = f.tellg();
  if (offset < 0 || offset > size) throw Error(label(p) + ": external data offset " + std::to_string(offset) + " is past the end of " + location);
  if (length < 0) length = size - offset;
  if (static_cast<size_t>(length) != expected || length > size - offset)
    throw Error(label(p) + ": external data in " + location + " holds " + std::to_string(std::min<int64_t>(length, size - offset)) +
                " bytes, shape needs " + std::to_string(expected));
  std::string out(static_cast<size_t>(length), '\0');
  f.seekg(offset);
  f.read(out.data(), length);
  if (!f) throw Error(label(p) + ": short read from " + location);
  return out;
}

template <typename Src, typename Dst>
void copy_field(const google::protobuf::RepeatedField<Src>& field, Tensor& t, const onnx::TensorProto& p) {
  if (static_cast<int64_t>(field.size()) != t.numel())
    throw Error(label(p) + " has " + std::to_string(field.size()) + " values, shape " + shape_str(t.shape()) +
                " needs " + std::to_string(t.numel()));
  Dst* d = t.data<Dst>();
  for (int i = 0; i < field.size(); ++i) d[i] = static_cast<Dst>(field.Get(i));
}

}  // namespace

Tensor tensor_from_proto(const onnx::TensorProto& p, const std::string& base_dir) {
  DType dt = static_cast<DType>(p.data_type());
  if (dtype_size(dt) == 0)
    throw Error(label(p) + " has unsupported data type " + std::to_string(p.data_type()) + " (" + dtype_name(dt) + ")");
  Shape shape(p.dims().begin(), p.dims().end());
  // Check the declared size against the bytes present before allocating: a 100-byte file
  // can declare a 16 GiB tensor, and allocating (and zeroing) that first is a cheap DoS.
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error(label(p) + " has a negative dimension");
    if (d != 0 && numel > (int64_t(1) << 40) / d) throw Error(label(p) + " shape " + shape_str(shape) + " is too large");
    numel *= d;
  }
  size_t bytes = static_cast<size_t>(numel) * dtype_size(dt);
  if (p.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string raw = read_external(p, base_dir, bytes);
    Tensor t = Tensor::empty(dt, shape);
    if (bytes) std::memcpy(t.raw(), raw.data(), bytes);
    return t;
  }
  if (p.has_raw_data()) {
    if (p.raw_data().size() != bytes)
      throw Error(label(p) + " raw data has " + std::to_string(p.raw_data().size()) + " bytes, shape " +
                  shape_str(shape) + " needs " + std::to_string(bytes));
    Tensor t = Tensor::empty(dt, shape);
    if (bytes) std::memcpy(t.raw(), p.raw_data().data(), bytes);
    return t;
  }
  // Typed fields hold at most one value per element; more elements than the message has
  // bytes cannot be right (copy_field then checks the exact count).
  if (static_cast<size_t>(numel) > p.ByteSizeLong())
    throw Error(label(p) + " declares shape " + shape_str(shape) + " but holds only " + std::to_string(p.ByteSizeLong()) +
                " bytes of data");
  Tensor t = Tensor::empty(dt, shape);
  if (t.numel() == 0) return t;
  switch (dt) {
    case DType::kFloat32: copy_field<float, float>(p.float_data(), t, p); break;
    case DType::kFloat64: copy_field<double, double>(p.double_data(), t, p); break;
    case DType::kInt64: copy_field<int64_t, int64_t>(p.int64_data(), t, p); break;
    case DType::kUint64: copy_field<uint64_t, uint64_t>(p.uint64_data(), t, p); break;
    case DType::kUint32: copy_field<uint64_t, uint32_t>(p.uint64_data(), t, p); break;
    case DType::kInt32: copy_field<int32_t, int32_t>(p.int32_data(), t, p); break;
    case DType::kInt16: copy_field<int32_t, int16_t>(p.int32_data(), t, p); break;
    case DType::kUint16: copy_field<int32_t, uint16_t>(p.int32_data(), t, p); break;
    case DType::kInt8: copy_field<int32_t, int8_t>(p.int32_data(), t, p); break;
    case DType::kUint8: copy_field<int32_t, uint8_t>(p.int32_data(), t, p); break;
    case DType::kBool: copy_field<int32_t, uint8_t>(p.int32_data(), t, p); break;
    // float16/bfloat16 travel as their bit patterns in int32_data.
    case DType::kFloat16: case DType::kBFloat16: copy_field<int32_t, uint16_t>(p.int32_data(), t, p); break;
    default: throw Error(label(p) + ": unsupported data type");
  }
  return t;
}

void tensor_to_proto(const Tensor& t, onnx::TensorProto* p) {
  p->set_data_type(static_cast<int32_t>(t.dtype()));
  p->clear_dims();
  for (int64_t d : t.shape()) p->add_dims(d);
  p->set_raw_data(std::string(static_cast<const char*>(t.raw()), t.nbytes()));
}

}  // namespace mminfer::onnx_io
