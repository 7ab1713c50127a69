// The two loops of cached attention for query rows that see the same keys (the query heads of
// one KV head in a decode step, or one head's rows over all keys): each key and value row is
// loaded once for up to kGroupRows query rows, and the output rows are summed in registers.
// AVX2 and AVX-512 twins; cached_attention::run picks one at run time for float caches (the
// test suite's MMINFER_ISA=avx2 run covers the AVX2 one on AVX-512 machines).
#pragma once
#include <cstdint>

#include "kernels/cpu/nn/cached_attention.h"  // kGroupRows

namespace mminfer::kernels::cached_attention {

// s[r * lds + j] = q[r] · k_j for r < rows (1..kGroupRows) and the n key rows k, k + stride, ...
void group_scores_avx2(const float* const* q, int rows, const float* k, int64_t stride, int64_t n, int64_t d, float* s,
                       int64_t lds);
void group_scores_avx512(const float* const* q, int rows, const float* k, int64_t stride, int64_t n, int64_t d, float* s,
                         int64_t lds);

// out[r][0, dv) = Σ_j w[r * ldw + j] * v_j over the n value rows v, v + stride, ...
void group_values_avx2(const float* w, int64_t ldw, int rows, const float* v, int64_t stride, int64_t n, int64_t dv,
                       float* const* out);
void group_values_avx512(const float* w, int64_t ldw, int rows, const float* v, int64_t stride, int64_t n, int64_t dv,
                         float* const* out);

// The twin this CPU runs (cpu_features(), capped by MMINFER_ISA).
bool groups_use_avx512();

}  // namespace mminfer::kernels::cached_attention
