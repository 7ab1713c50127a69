// AVX2 ops for the loops of cached attention: over an INT8 cache (cached_attention_int8_body.h,
// 8 codes per load) and for rows that share their keys (cached_attention_group_body.h, 8 floats
// per vector).
#include "kernels/cpu/common/f32_vector_avx2.h"
#include "kernels/cpu/nn/cached_attention_group_body.h"
#include "kernels/cpu/nn/cached_attention_int8_body.h"

namespace mminfer::kernels::cached_attention {

using Avx2Ops = F32x8;

void int8_scores_avx2(const float* q, const int8_t* k, int64_t stride, int64_t n, int64_t d, float* s) {
  int8_scores<Avx2Ops>(q, k, stride, n, d, s);
}

void int8_accumulate_avx2(const float* w, const int8_t* v, int64_t stride, int64_t n, int64_t dv, float* out) {
  int8_accumulate<Avx2Ops>(w, v, stride, n, dv, out);
}

void group_scores_avx2(const float* const* q, int rows, const float* k, int64_t stride, int64_t n, int64_t d, float* s,
                       int64_t lds) {
  group_scores<Avx2Ops>(q, rows, k, stride, n, d, s, lds);
}

void group_values_avx2(const float* w, int64_t ldw, int rows, const float* v, int64_t stride, int64_t n, int64_t dv,
                       float* const* out) {
  group_values<Avx2Ops>(w, ldw, rows, v, stride, n, dv, out);
}

}  // namespace mminfer::kernels::cached_attention
