// An epilogue Activation (see epilogue.h) in AVX2 / AVX-512 vector form, for kernels that finish
// their own output tiles instead of leaving it to oneDNN's post-ops. Activation::apply is the
// scalar twin the tests compare against.
#pragma once
#include <cstdint>

#include "kernels/cpu/common/vector_math.h"
#include "kernels/cpu/gemm/epilogue.h"

namespace mminfer::kernels {

// Calls fn(f) once, f being the activation as a __m256 -> __m256 function (its trailing scale and
// shift included), so a kernel can apply it to values still in registers; the switch over the
// kind happens here, once, not per vector.
template <typename Fn>
void visit_activation_avx2(const Activation& act, Fn&& fn);

// In place over an array.
void apply_activation_avx2(const Activation& act, float* y, int64_t n);

// The same with 512-bit vectors; call only when cpu_features().avx512f (activation_avx512.cpp is
// built with -mavx512f).
void apply_activation_avx512(const Activation& act, float* y, int64_t n);

template <typename Fn>
void visit_activation_avx2(const Activation& act, Fn&& fn) {
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.f), half = _mm256_set1_ps(0.5f);
  const __m256 alpha = _mm256_set1_ps(act.alpha), beta = _mm256_set1_ps(act.beta);
  const __m256 scale = _mm256_set1_ps(act.scale), shift = _mm256_set1_ps(act.shift);
  const bool affine = act.has_affine();
  auto run = [&](auto f) {
    if (affine) fn([&](__m256 v) { return _mm256_add_ps(_mm256_mul_ps(f(v), scale), shift); });
    else fn(f);
  };
  switch (act.kind) {
    case Activation::kNone: return run([](__m256 v) { return v; });
    case Activation::kRelu: return run([&](__m256 v) { return _mm256_max_ps(v, zero); });
    case Activation::kLeakyRelu:
      return run([&](__m256 v) { return _mm256_blendv_ps(v, _mm256_mul_ps(alpha, v), _mm256_cmp_ps(v, zero, _CMP_LT_OQ)); });
    case Activation::kClip: return run([&](__m256 v) { return _mm256_min_ps(_mm256_max_ps(v, alpha), beta); });
    case Activation::kHardSigmoid:
      return run([&](__m256 v) { return _mm256_max_ps(zero, _mm256_min_ps(one, _mm256_add_ps(_mm256_mul_ps(alpha, v), beta))); });
    case Activation::kHardSwish:
      return run([&](__m256 v) {
        __m256 gate = _mm256_add_ps(_mm256_div_ps(v, _mm256_set1_ps(6.f)), half);
        return _mm256_mul_ps(v, _mm256_max_ps(zero, _mm256_min_ps(one, gate)));
      });
    case Activation::kSigmoid: return run(vmath::sigmoid_avx2);
    case Activation::kTanh: return run(vmath::tanh_avx2);
    case Activation::kGeluErf:
      return run([&](__m256 v) {
        __m256 e = vmath::erf_avx2(_mm256_mul_ps(v, _mm256_set1_ps(0.70710678118654752f)));
        return _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_add_ps(one, e));
      });
    case Activation::kGeluTanh:
      return run([&](__m256 v) {
        __m256 cube = _mm256_mul_ps(_mm256_set1_ps(0.044715f), _mm256_mul_ps(v, _mm256_mul_ps(v, v)));
        __m256 inner = _mm256_mul_ps(_mm256_set1_ps(0.79788456080286536f), _mm256_add_ps(v, cube));
        return _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_add_ps(one, vmath::tanh_avx2(inner)));
      });
    case Activation::kSilu:
      return run([&](__m256 v) { return _mm256_mul_ps(v, vmath::sigmoid_avx2(_mm256_mul_ps(alpha, v))); });
  }
}

}  // namespace mminfer::kernels
