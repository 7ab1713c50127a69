// Dot products between two sets of rows of one matrix: out[i * nb + j] = m[a[i]] · m[b[j]], each
// row `c` floats long at a stride of `c`. Token merging's similarity matrix is this, a few dozen
// rows square: small enough that a GEMM library's threading costs more than its arithmetic,
// large enough (x a ViT's width) that one dot product at a time leaves most of the FMA units idle.
// The caller splits `a` over threads; each output is the same whichever rows share its call.
#pragma once
#include <cstdint>

namespace mminfer::kernels {

void row_dots(const float* m, int64_t c, const int64_t* a, int64_t na, const int64_t* b, int64_t nb, float* out);

// The AVX-512 twin (row_dots_avx512.cpp), reached through row_dots.
void row_dots_avx512(const float* m, int64_t c, const int64_t* a, int64_t na, const int64_t* b, int64_t nb,
                     float* out);

}  // namespace mminfer::kernels
