#include "kernels/cpu/activation_simd.h"

#include "kernels/cpu/vector_math.h"

namespace mminfer::kernels {

namespace {

template <typename F>
void map_with_affine(const Activation& act, float* y, int64_t n, F f) {
  if (!act.has_affine()) {
    vmath::map_avx2(y, y, n, f);
    return;
  }
  __m256 scale = _mm256_set1_ps(act.scale), shift = _mm256_set1_ps(act.shift);
  vmath::map_avx2(y, y, n, [&](__m256 v) { return _mm256_add_ps(_mm256_mul_ps(f(v), scale), shift); });
}

}  // namespace

void apply_activation_avx2(const Activation& act, float* y, int64_t n) {
  if (act.identity() || n <= 0) return;
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.f), half = _mm256_set1_ps(0.5f);
  const __m256 alpha = _mm256_set1_ps(act.alpha), beta = _mm256_set1_ps(act.beta);
  auto run = [&](auto f) { map_with_affine(act, y, n, f); };
  switch (act.kind) {
    case Activation::kNone: return run([](__m256 v) { return v; });
    case Activation::kRelu: return run([&](__m256 v) { return _mm256_max_ps(v, zero); });
    case Activation::kLeakyRelu:
      return run([&](__m256 v) {
        return _mm256_blendv_ps(v, _mm256_mul_ps(alpha, v), _mm256_cmp_ps(v, zero, _CMP_LT_OQ));
      });
    case Activation::kClip: return run([&](__m256 v) { return _mm256_min_ps(_mm256_max_ps(v, alpha), beta); });
    case Activation::kHardSigmoid:
      return run([&](__m256 v) {
        return _mm256_max_ps(zero, _mm256_min_ps(one, _mm256_add_ps(_mm256_mul_ps(alpha, v), beta)));
      });
    case Activation::kHardSwish: {
      const __m256 six = _mm256_set1_ps(6.f);
      return run([&](__m256 v) {
        __m256 gate = _mm256_add_ps(_mm256_div_ps(v, six), half);
        return _mm256_mul_ps(v, _mm256_max_ps(zero, _mm256_min_ps(one, gate)));
      });
    }
    case Activation::kSigmoid: return run(vmath::sigmoid_avx2);
    case Activation::kTanh: return run(vmath::tanh_avx2);
    case Activation::kGeluErf: {
      const __m256 inv_sqrt2 = _mm256_set1_ps(0.70710678118654752f);
      return run([&](__m256 v) {
        __m256 e = vmath::erf_avx2(_mm256_mul_ps(v, inv_sqrt2));
        return _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_add_ps(one, e));
      });
    }
    case Activation::kGeluTanh: {
      const __m256 c0 = _mm256_set1_ps(0.79788456080286536f), c1 = _mm256_set1_ps(0.044715f);
      return run([&](__m256 v) {
        __m256 inner = _mm256_mul_ps(c0, _mm256_add_ps(v, _mm256_mul_ps(c1, _mm256_mul_ps(v, _mm256_mul_ps(v, v)))));
        return _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_add_ps(one, vmath::tanh_avx2(inner)));
      });
    }
    case Activation::kSilu:
      return run([&](__m256 v) { return _mm256_mul_ps(v, vmath::sigmoid_avx2(_mm256_mul_ps(alpha, v))); });
  }
}

}  // namespace mminfer::kernels
