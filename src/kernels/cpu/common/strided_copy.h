// Strided copies shared by the data-movement kernels (Transpose, Slice, Expand, DepthToSpace,
// SpaceToDepth). They move bytes by element size, so one path serves every dtype.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "mminfer/tensor.h"

namespace mminfer::kernels::layout {

// Row-major element strides of a contiguous tensor.
std::vector<int64_t> contiguous_strides(const Shape& shape);

// Fills contiguous `dst` (shape `out_shape`) from a view of `src`: the output element at
// index (i0, ..., in) reads src element `offset + sum(ik * strides[k])`. Strides may be zero
// (broadcast) or negative (reversed slices). Uses row copies or cache-blocked tiles.
void strided_copy(const void* src, void* dst, size_t elem_size, const Shape& out_shape,
                  const std::vector<int64_t>& strides, int64_t offset);

// The plain element-by-element twin of strided_copy, for tests.
void strided_copy_naive(const void* src, void* dst, size_t elem_size, const Shape& out_shape,
                        const std::vector<int64_t>& strides, int64_t offset);

// Output dim k is input dim perm[k].
Shape permuted_shape(const Shape& in_shape, const std::vector<int64_t>& perm);
void transpose(const void* src, void* dst, size_t elem_size, const Shape& in_shape, const std::vector<int64_t>& perm);
void transpose_naive(const void* src, void* dst, size_t elem_size, const Shape& in_shape,
                     const std::vector<int64_t>& perm);

}  // namespace mminfer::kernels::layout
