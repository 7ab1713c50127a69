// The 8-lane float operations that the kernels' loop templates take as their `Ops` (row_dots,
// panel_dots, cached attention), so each ISA's operations are written once. Internal linkage:
// a file built with wider flags gets its own copies, never the baseline's. Needs AVX2 and FMA,
// the build's baseline.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/common/vector_math.h"

namespace mminfer::kernels {
namespace {

struct F32x8 {
  using V = __m256;
  static constexpr int64_t kLanes = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  // min(left, 8) floats, the rest zero.
  static V load(const float* p, int64_t left) {
    return left >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, vmath::tail_mask(left));
  }
  // 8 int8 values as floats.
  static V load(const int8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static void store(float* p, V v, int64_t left) {
    if (left >= 8) _mm256_storeu_ps(p, v);
    else _mm256_maskstore_ps(p, vmath::tail_mask(left), v);
  }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  // The lanes' sum: ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)).
  static float sum(V v) { return vmath::hsum(v); }
  // Four vectors' lane sums as one vector.
  static __m128 sum4(V a, V b, V c, V d) { return vmath::sum4(a, b, c, d); }
};

}  // namespace
}  // namespace mminfer::kernels
