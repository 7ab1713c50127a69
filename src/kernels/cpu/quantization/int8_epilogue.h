// The last step of an INT8 GEMM (Int8Gemm), one output row at a time:
//   y[n] = act(float(acc[n] - zp · w_sum[n]) · w_scale[n] · a_scale + bias[n] + residual[n])
// where acc is the u8·s8 product in int32, zp and a_scale the row's activation zero point and
// scale, w_sum[n] = Σ_k w[k, n] and w_scale the weights' per-column scale. The zero point's
// share is taken off in int32, so it is exact. acc and y may be the same bytes.
#pragma once
#include <cstdint>

#include "kernels/cpu/gemm/epilogue.h"

namespace mminfer::kernels {

struct Int8Columns {
  const int32_t* w_sum;
  const float* w_scale;
  const float* bias;  // N values (zeros when the node has none)
  Activation act;
};

// residual may be null. AVX2; AVX-512 (only when cpu_features().avx512f); the plain scalar twin.
void finish_int8_row_avx2(const Int8Columns& c, const int32_t* acc, int64_t n, int32_t zp, float a_scale,
                          const float* residual, float* y);
void finish_int8_row_avx512(const Int8Columns& c, const int32_t* acc, int64_t n, int32_t zp, float a_scale,
                            const float* residual, float* y);
void finish_int8_row_reference(const Int8Columns& c, const int32_t* acc, int64_t n, int32_t zp, float a_scale,
                               const float* residual, float* y);

}  // namespace mminfer::kernels
