// Shape logic and dtype helpers shared by the MatMul family (MatMul, MatMulInteger,
// QLinearMatMul, FusedMatMul).
#pragma once
#include <cstdint>
#include <vector>

#include "mminfer/tensor.h"

namespace mminfer::kernels {

// numpy matmul semantics: 1-D operands are promoted and their dimension dropped from the
// output, batch dimensions broadcast.
struct MatMulShape {
  int64_t M = 0, K = 0, N = 0;
  Shape out;                                // final output shape
  int64_t batch = 1;                        // product of the broadcast batch dims
  std::vector<int64_t> a_offset, b_offset;  // element offset of each batch's matrix
  bool b_is_matrix = false;                 // B has no batch (or only 1s): A's batches fold into M
  bool a_is_matrix = false;
};

// Throws with a clear message when K disagrees or batch dims do not broadcast.
MatMulShape matmul_shape(const Shape& a, const Shape& b, bool want_offsets);

// float16 / bfloat16 / float64 to float32 and back, for kernels that compute in float32.
std::vector<float> to_f32(const Tensor& t);
void from_f32(const float* src, Tensor& t);

}  // namespace mminfer::kernels
