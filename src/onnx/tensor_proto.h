// ONNX TensorProto <-> Tensor.
#pragma once
#include <string>

#include <onnx/onnx_pb.h>

#include "mminfer/tensor.h"

namespace mminfer::onnx_io {

// base_dir resolves external data; what names the tensor in error messages.
Tensor tensor_from_proto(const onnx::TensorProto& p, const std::string& base_dir);
void tensor_to_proto(const Tensor& t, onnx::TensorProto* p);

}  // namespace mminfer::onnx_io
