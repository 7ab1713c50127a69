#include "numpy_conversion.h"

#include <bit>
#include <cstdint>

#include "common.h"

namespace mminfer::python {

std::string ort_type_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "tensor(float)";
    case DType::kUint8: return "tensor(uint8)";
    case DType::kInt8: return "tensor(int8)";
    case DType::kUint16: return "tensor(uint16)";
    case DType::kInt16: return "tensor(int16)";
    case DType::kInt32: return "tensor(int32)";
    case DType::kInt64: return "tensor(int64)";
    case DType::kString: return "tensor(string)";
    case DType::kBool: return "tensor(bool)";
    case DType::kFloat16: return "tensor(float16)";
    case DType::kFloat64: return "tensor(double)";
    case DType::kUint32: return "tensor(uint32)";
    case DType::kUint64: return "tensor(uint64)";
    case DType::kBFloat16: return "tensor(bfloat16)";
    case DType::kUndefined: break;
  }
  return "tensor(undefined)";
}

py::dtype numpy_dtype(DType t, const std::string& what) {
  switch (t) {
    case DType::kFloat32: return py::dtype("float32");
    case DType::kFloat64: return py::dtype("float64");
    case DType::kFloat16: return py::dtype("float16");
    case DType::kInt8: return py::dtype("int8");
    case DType::kInt16: return py::dtype("int16");
    case DType::kInt32: return py::dtype("int32");
    case DType::kInt64: return py::dtype("int64");
    case DType::kUint8: return py::dtype("uint8");
    case DType::kUint16: return py::dtype("uint16");
    case DType::kUint32: return py::dtype("uint32");
    case DType::kUint64: return py::dtype("uint64");
    case DType::kBool: return py::dtype("bool");
    default: break;
  }
  throw PyError(what + " is " + ort_type_name(t) + ", which has no NumPy dtype");
}

DType dtype_of(const py::dtype& dt) {
  const auto size = dt.itemsize();
  switch (dt.kind()) {
    case 'f':
      return size == 2 ? DType::kFloat16 : size == 4 ? DType::kFloat32 : size == 8 ? DType::kFloat64 : DType::kUndefined;
    case 'i':
      return size == 1 ? DType::kInt8 : size == 2 ? DType::kInt16 : size == 4 ? DType::kInt32 : size == 8 ? DType::kInt64
                                                                                                         : DType::kUndefined;
    case 'u':
      return size == 1 ? DType::kUint8 : size == 2 ? DType::kUint16 : size == 4 ? DType::kUint32 : size == 8 ? DType::kUint64
                                                                                                            : DType::kUndefined;
    case 'b':
      return size == 1 ? DType::kBool : DType::kUndefined;
    default:
      return DType::kUndefined;
  }
}

namespace {

// Set by init_numpy() when the module loads (a function-local static first initialized by two
// threads at once could deadlock on the GIL); kept for the interpreter's life.
py::module_* numpy_module = nullptr;

const py::module_& numpy() { return *numpy_module; }

bool native_order(const py::dtype& dt) {
  const char order = dt.byteorder();
  const char native = std::endian::native == std::endian::little ? '<' : '>';
  return order == '=' || order == '|' || order == native;
}

bool plain_python(py::handle value) {
  return py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value) || py::isinstance<py::bool_>(value) ||
         py::isinstance<py::int_>(value) || py::isinstance<py::float_>(value);
}

}  // namespace

void init_numpy() {
  numpy_module = new py::module_(py::module_::import("numpy"));
  py::detail::npy_api::get();  // pybind11's own table of NumPy's C API
}

InputTensor to_input(const std::string& name, py::handle value, DType expected) {
  const std::string what = "input '" + name + "'";
  py::array array;
  if (py::isinstance<py::array>(value)) {
    array = py::reinterpret_borrow<py::array>(value);
  } else if (plain_python(value) && expected != DType::kUndefined && expected != DType::kString &&
             expected != DType::kBFloat16) {
    array = numpy().attr("asarray")(value, numpy_dtype(expected, what));
  } else {
    array = numpy().attr("asarray")(value);
  }
  const DType dtype = dtype_of(array.dtype());
  const std::string given = py::str(array.dtype()).cast<std::string>();
  if (dtype == DType::kUndefined)
    throw PyError(what + " has NumPy dtype " + given + ", which is not a tensor type mminfer runs" +
                  (expected != DType::kUndefined ? " (the model expects " + ort_type_name(expected) + ")" : ""));
  if (expected != DType::kUndefined && dtype != expected) {
    std::string hint;
    if (expected != DType::kString && expected != DType::kBFloat16)
      hint = ": convert it, e.g. x.astype(numpy." + (expected == DType::kBool ? std::string("bool_")
                                                                             : py::str(numpy_dtype(expected, what)).cast<std::string>()) + ")";
    throw PyError("Unexpected input data type for " + what + ". Actual: " + ort_type_name(dtype) + " (numpy " + given +
                  "), expected: " + ort_type_name(expected) + hint);
  }
  constexpr int kCAligned = py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_ | py::detail::npy_api::NPY_ARRAY_ALIGNED_;
  if ((array.flags() & kCAligned) != kCAligned || !native_order(array.dtype()))
    array = numpy().attr("require")(array, array.dtype().attr("newbyteorder")("="), py::make_tuple("C", "A"));
  Shape shape(static_cast<size_t>(array.ndim()));
  for (size_t d = 0; d < shape.size(); ++d) shape[d] = static_cast<int64_t>(array.shape(static_cast<py::ssize_t>(d)));
  // The engine only reads inputs: a read-only array is viewed as it is.
  Tensor tensor = Tensor::view(dtype, std::move(shape), const_cast<void*>(array.data()));
  return {std::move(array), std::move(tensor)};
}

py::array to_numpy(Tensor tensor, const std::string& what) {
  py::dtype dtype = numpy_dtype(tensor.dtype(), what);
  std::vector<py::ssize_t> shape(tensor.shape().begin(), tensor.shape().end());
  if (tensor.numel() == 0 || tensor.raw() == nullptr) return py::array(dtype, shape);
  auto* owner = new Tensor(std::move(tensor));
  py::capsule base(owner, [](void* p) { delete static_cast<Tensor*>(p); });
  return py::array(dtype, shape, owner->raw(), base);
}

bool overlaps(const Tensor& t, const void* begin, size_t nbytes) {
  if (t.nbytes() == 0 || nbytes == 0 || t.raw() == nullptr || begin == nullptr) return false;
  auto a = reinterpret_cast<uintptr_t>(t.raw());
  auto b = reinterpret_cast<uintptr_t>(begin);
  return a < b + nbytes && b < a + t.nbytes();
}

}  // namespace mminfer::python
