// Small valid ONNX models built in memory with the ONNX protobuf API, so robustness tests
// need no python and no files at test time.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

namespace robust {

// A dimension below zero becomes a symbolic dimension named "N<index>".
void add_value_info(onnx::ValueInfoProto* vi, const std::string& name, int elem_type, const std::vector<int64_t>& dims);
void add_float_initializer(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
                           const std::vector<float>& values, bool raw);
void add_int64_initializer(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
                           const std::vector<int64_t>& values);
onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op, const std::vector<std::string>& inputs,
                          const std::vector<std::string>& outputs, const std::string& name = "");
void set_int_attr(onnx::NodeProto* n, const std::string& name, int64_t v);
void set_ints_attr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v);
onnx::ModelProto new_model(int opset);

// x[2,4] -> MatMul(W[4,3]) -> Add(B[3]) -> Relu -> y[2,3]; batch < 0 makes dim 0 symbolic.
onnx::ModelProto mlp_model(int64_t batch = 2);
// x[1,2,5,5] -> Conv(3 filters, 3x3, pad 1) -> Reshape(1,-1) via a Constant node -> Softmax -> y.
onnx::ModelProto conv_model(int64_t batch = 1);
// ids int64[3] -> Gather(table[5,2]) -> Concat(extra[1,2]) -> ReduceMean(axis 1) -> Transpose-free y[4].
onnx::ModelProto gather_model();
// c = a + b, both [N0, N1] symbolic.
onnx::ModelProto add_model();
// c = a @ b with a[N0,N1], b[N0,N1] symbolic (shapes chosen at run time).
onnx::ModelProto matmul_model();
// y = Softmax(x, axis -1), x[N0,N1].
onnx::ModelProto softmax_model();

std::string serialize(const onnx::ModelProto& m);

// Deterministic 64-bit generator (splitmix64): same sequence on every platform and library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }
  bool coin() { return next() & 1; }

 private:
  uint64_t s_;
};

}  // namespace robust
