// visit_activation_avx2 (activation_simd.h) with 512-bit vectors. Include only from translation
// units built with -mavx512f.
#pragma once
#include "kernels/cpu/common/vector_math_avx512.h"
#include "kernels/cpu/gemm/epilogue.h"

namespace mminfer::kernels {

template <typename Fn>
void visit_activation_avx512(const Activation& act, Fn&& fn) {
  const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.f), half = _mm512_set1_ps(0.5f);
  const __m512 alpha = _mm512_set1_ps(act.alpha), beta = _mm512_set1_ps(act.beta);
  const __m512 scale = _mm512_set1_ps(act.scale), shift = _mm512_set1_ps(act.shift);
  const bool affine = act.has_affine();
  auto run = [&](auto f) {
    if (affine) fn([&](__m512 v) { return _mm512_add_ps(_mm512_mul_ps(f(v), scale), shift); });
    else fn(f);
  };
  switch (act.kind) {
    case Activation::kNone: return run([](__m512 v) { return v; });
    case Activation::kRelu: return run([&](__m512 v) { return _mm512_max_ps(v, zero); });
    case Activation::kLeakyRelu:
      return run([&](__m512 v) { return _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), alpha, v); });
    case Activation::kClip: return run([&](__m512 v) { return _mm512_min_ps(_mm512_max_ps(v, alpha), beta); });
    case Activation::kHardSigmoid:
      return run([&](__m512 v) { return _mm512_max_ps(zero, _mm512_min_ps(one, _mm512_add_ps(_mm512_mul_ps(alpha, v), beta))); });
    case Activation::kHardSwish:
      return run([&](__m512 v) {
        __m512 gate = _mm512_add_ps(_mm512_div_ps(v, _mm512_set1_ps(6.f)), half);
        return _mm512_mul_ps(v, _mm512_max_ps(zero, _mm512_min_ps(one, gate)));
      });
    case Activation::kSigmoid: return run(vmath::sigmoid_avx512);
    case Activation::kTanh: return run(vmath::tanh_avx512);
    case Activation::kGeluErf:
      return run([&](__m512 v) {
        __m512 e = vmath::erf_avx512(_mm512_mul_ps(v, _mm512_set1_ps(0.70710678118654752f)));
        return _mm512_mul_ps(_mm512_mul_ps(half, v), _mm512_add_ps(one, e));
      });
    case Activation::kGeluTanh:
      return run([&](__m512 v) {
        __m512 cube = _mm512_mul_ps(_mm512_set1_ps(0.044715f), _mm512_mul_ps(v, _mm512_mul_ps(v, v)));
        __m512 inner = _mm512_mul_ps(_mm512_set1_ps(0.79788456080286536f), _mm512_add_ps(v, cube));
        return _mm512_mul_ps(_mm512_mul_ps(half, v), _mm512_add_ps(one, vmath::tanh_avx512(inner)));
      });
    case Activation::kSilu:
      return run([&](__m512 v) { return _mm512_mul_ps(v, vmath::sigmoid_avx512(_mm512_mul_ps(alpha, v))); });
  }
}

}  // namespace mminfer::kernels
