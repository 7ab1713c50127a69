// The two loops of cached attention over an INT8 cache (core/int8_rows.h: each row's codes, then
// its scale), dequantized in registers: the codes are widened to float lanes as they are loaded
// and the row's scale is applied once per row. AVX2 and AVX-512 twins; cached_attention::run
// picks one at run time, tests call both.
#pragma once
#include <cstdint>

namespace mminfer::kernels::cached_attention {

// s[j] = (q · code_j) * scale_j for the n rows k, k + stride, ... (stride in bytes), d codes each.
void int8_scores_avx2(const float* q, const int8_t* k, int64_t stride, int64_t n, int64_t d, float* s);
void int8_scores_avx512(const float* q, const int8_t* k, int64_t stride, int64_t n, int64_t d, float* s);

// out[0, dv) += Σ_j w[j] * scale_j * code_j over the n rows v, v + stride, ...
void int8_accumulate_avx2(const float* w, const int8_t* v, int64_t stride, int64_t n, int64_t dv, float* out);
void int8_accumulate_avx512(const float* w, const int8_t* v, int64_t stride, int64_t n, int64_t dv, float* out);

// The twin this CPU runs (cpu_features(), capped by MMINFER_ISA).
bool int8_uses_avx512();

}  // namespace mminfer::kernels::cached_attention
