// Shared pieces of the element-wise kernel families: dtype dispatch and float16/bfloat16
// conversion (those types are computed through float32).
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/half.h"
#include "kernels/cpu/common/kernel.h"

namespace mminfer::kernels {

template <typename T>
struct TypeTag {
  using type = T;
};

// Elements per parallel chunk: cheap arithmetic needs big chunks to pay for a thread wake-up.
constexpr int64_t kGrainCheap = 32768;
constexpr int64_t kGrainTranscendental = 4096;

inline bool is_half_type(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

// Calls fn(TypeTag<T>{}) for the C++ type of a plain numeric dtype (bool is uint8_t storage,
// float16/bfloat16 are not handled here); returns false when `t` is none of them.
template <typename Fn>
bool visit_numeric(DType t, Fn&& fn) {
  switch (t) {
    case DType::kFloat32: fn(TypeTag<float>{}); return true;
    case DType::kFloat64: fn(TypeTag<double>{}); return true;
    case DType::kInt64: fn(TypeTag<int64_t>{}); return true;
    case DType::kInt32: fn(TypeTag<int32_t>{}); return true;
    case DType::kInt16: fn(TypeTag<int16_t>{}); return true;
    case DType::kInt8: fn(TypeTag<int8_t>{}); return true;
    case DType::kUint8: fn(TypeTag<uint8_t>{}); return true;
    case DType::kUint16: fn(TypeTag<uint16_t>{}); return true;
    case DType::kUint32: fn(TypeTag<uint32_t>{}); return true;
    case DType::kUint64: fn(TypeTag<uint64_t>{}); return true;
    default: return false;
  }
}

inline void halfs_to_float(DType t, const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  if (t == DType::kFloat16) {
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
    for (; i < n; ++i) dst[i] = half_to_float(src[i]);
  } else {
    for (; i < n; ++i) dst[i] = bf16_to_float(src[i]);
  }
}

inline void float_to_halfs(DType t, const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  if (t == DType::kFloat16) {
    for (; i + 8 <= n; i += 8)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                       _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; ++i) dst[i] = float_to_half(src[i]);
  } else {
    for (; i < n; ++i) dst[i] = float_to_bf16(src[i]);
  }
}

// A float32 copy of a float16/bfloat16 tensor.
inline Tensor half_tensor_to_float(const Tensor& t) {
  Tensor f = Tensor::empty(DType::kFloat32, t.shape());
  halfs_to_float(t.dtype(), t.data<uint16_t>(), f.data<float>(), t.numel());
  return f;
}

inline void float_tensor_to_half(const Tensor& f, Tensor& out) {
  float_to_halfs(out.dtype(), f.data<float>(), out.data<uint16_t>(), f.numel());
}

// Runs fn(const float* x, float* y, n) over a float16/bfloat16 array in float32 chunks.
template <typename Fn>
void map_halfs_via_float(DType t, const uint16_t* x, uint16_t* y, int64_t n, Fn&& fn) {
  constexpr int64_t kChunk = 1024;
  alignas(32) float buf_in[kChunk];
  alignas(32) float buf_out[kChunk];
  for (int64_t i = 0; i < n; i += kChunk) {
    int64_t m = std::min(kChunk, n - i);
    halfs_to_float(t, x + i, buf_in, m);
    fn(static_cast<const float*>(buf_in), static_cast<float*>(buf_out), m);
    float_to_halfs(t, buf_out, y + i, m);
  }
}

}  // namespace mminfer::kernels
