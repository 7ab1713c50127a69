// The inner loops of cached attention (cached_attention.h), in AVX2 and AVX-512 twins
// (cached_attention_avx2.cpp, cached_attention_avx512.cpp); cached_attention::run picks the twin
// this CPU runs, and the test suite's MMINFER_ISA=avx2 run covers the AVX2 one on AVX-512
// machines.
#pragma once
#include <cstdint>

#include "kernels/cpu/nn/cached_attention.h"  // kGroupRows

namespace mminfer::kernels::cached_attention {

// Over an INT8 cache (core/int8_rows.h: each row's codes, then its scale), dequantized in
// registers: the codes are widened to float lanes as they are loaded and the row's scale is
// applied once per row.
// s[j] = (q · code_j) * scale_j for the n rows k, k + stride, ... (stride in bytes), d codes each.
void int8_scores_avx2(const float* q, const int8_t* k, int64_t stride, int64_t n, int64_t d, float* s);
void int8_scores_avx512(const float* q, const int8_t* k, int64_t stride, int64_t n, int64_t d, float* s);
// out[0, dv) += Σ_j w[j] * scale_j * code_j over the n rows v, v + stride, ...
void int8_accumulate_avx2(const float* w, const int8_t* v, int64_t stride, int64_t n, int64_t dv, float* out);
void int8_accumulate_avx512(const float* w, const int8_t* v, int64_t stride, int64_t n, int64_t dv, float* out);

// For query rows that see the same keys (the query heads of one KV head in a decode step, or one
// head's rows over all keys): each key and value row is loaded once for up to kGroupRows query
// rows, and the output rows are summed in registers.
// s[r * lds + j] = q[r] · k_j for r < rows (1..kGroupRows) and the n key rows k, k + stride, ...
void group_scores_avx2(const float* const* q, int rows, const float* k, int64_t stride, int64_t n, int64_t d, float* s,
                       int64_t lds);
void group_scores_avx512(const float* const* q, int rows, const float* k, int64_t stride, int64_t n, int64_t d, float* s,
                         int64_t lds);
// out[r][0, dv) += Σ_j w[r * ldw + j] * v_j over the n value rows v, v + stride, ...
void group_values_avx2(const float* w, int64_t ldw, int rows, const float* v, int64_t stride, int64_t n, int64_t dv,
                       float* const* out);
void group_values_avx512(const float* w, int64_t ldw, int rows, const float* v, int64_t stride, int64_t n, int64_t dv,
                         float* const* out);

}  // namespace mminfer::kernels::cached_attention
