// NumPy arrays <-> mminfer::Tensor, without copies where the memory allows it.
#pragma once
#include <string>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "mminfer/tensor.h"

namespace mminfer::python {

namespace py = pybind11;

// Imports NumPy; called once when the extension module loads, before any conversion.
void init_numpy();

// ONNX Runtime's name of a tensor type: "tensor(float)", "tensor(int64)", ...
std::string ort_type_name(DType t);
// The NumPy dtype of a DType; PyError for the types NumPy has none of (bfloat16, string).
py::dtype numpy_dtype(DType t, const std::string& what);
// kUndefined when the NumPy dtype is none of the tensor types.
DType dtype_of(const py::dtype& dt);

// A graph input made from a Python value: `tensor` views the memory of `array`, which the
// caller keeps alive (and holds) for as long as the tensor is used.
struct InputTensor {
  py::array array;
  Tensor tensor;
};

// C-contiguous, aligned arrays of native byte order and of the dtype the model expects are
// viewed as they are; other arrays are copied into C order first. Python scalars, lists and
// tuples become arrays of the expected dtype (as ONNX Runtime does with lists); other objects go
// through numpy.asarray. A dtype other than `expected` (when known) raises, naming both: no
// silent casts.
InputTensor to_input(const std::string& name, py::handle value, DType expected);

// The tensor as a NumPy array over its own storage (kept alive by the array), no copy.
py::array to_numpy(Tensor tensor, const std::string& what);

// True when the bytes of `t` overlap [begin, begin + nbytes).
bool overlaps(const Tensor& t, const void* begin, size_t nbytes);

}  // namespace mminfer::python
