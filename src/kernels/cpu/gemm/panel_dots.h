// Dot products of many stored rows with one vector (a GEMV), with the rows packed in panels of
// 16: panel p holds rows 16p..16p+15 column by column (k-major), so one vector load gives the
// same column of 16 rows and the 16 sums build up in one register, with no reduction across
// lanes and one forward stream through memory. Every lane sums its row in a fixed order: four
// partial sums over k mod 4 (fused multiply-adds, k rising), then (s0 + s1) + (s2 + s3).
// panel_row_dot() follows that order for a single row, so its result equals the panel kernels'
// bit for bit (runtime/logits_head reads single rows of the tokens an int8 copy cannot rule out).
#pragma once
#include <cstdint>

namespace mminfer::kernels {

inline constexpr int64_t kPanelRows = 16;

// out[16 * (p - first) + j] = sum_k panels[p][k][j] * x[k] for panels p in [first, last).
// `d`: the length of each row (any). The caller splits the panels over threads.
void panel_dots(const float* panels, int64_t d, const float* x, int64_t first, int64_t last, float* out);
void panel_dots(const int8_t* panels, int64_t d, const float* x, int64_t first, int64_t last, float* out);  // codes widened

// The same sum for row `row` alone, in the same order.
float panel_row_dot(const float* panels, int64_t d, const float* x, int64_t row);

// The AVX-512 twins (panel_dots_avx512.cpp), reached through panel_dots.
void panel_dots_avx512(const float* panels, int64_t d, const float* x, int64_t first, int64_t last, float* out);
void panel_dots_avx512(const int8_t* panels, int64_t d, const float* x, int64_t first, int64_t last, float* out);

}  // namespace mminfer::kernels
