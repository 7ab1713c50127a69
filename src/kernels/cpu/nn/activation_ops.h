// Activation functions as MapKernel ops (see map_kernel.h). Each hot op has an AVX2 `f32` path;
// its float `operator()` is the scalar twin the unit tests compare against.
#pragma once
#include <cmath>
#include <limits>
#include <string>

#include "kernels/cpu/common/elementwise_common.h"
#include "kernels/cpu/common/vector_math.h"

namespace mminfer::kernels::act {

using vmath::map_avx2;

struct Relu {
  static constexpr bool kInts = true;
  static constexpr int64_t kGrain = kGrainCheap;
  template <typename T>
  T operator()(T x) const { return T(0) > x ? T(0) : x; }  // max_ps(0, x): NaN and -0 pass through
  void f32(const float* x, float* y, int64_t n) const {
    map_avx2(x, y, n, [](__m256 v) { return _mm256_max_ps(_mm256_setzero_ps(), v); });
  }
};

struct LeakyRelu {
  static constexpr bool kInts = false;
  static constexpr int64_t kGrain = kGrainCheap;
  float alpha = 0.01f;
  template <typename T>
  T operator()(T x) const { return x < T(0) ? static_cast<T>(alpha) * x : x; }
  void f32(const float* x, float* y, int64_t n) const {
    __m256 a = _mm256_set1_ps(alpha);
    map_avx2(x, y, n, [a](__m256 v) {
      return _mm256_blendv_ps(v, _mm256_mul_ps(a, v), _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ));
    });
  }
};

struct Sigmoid {
  static constexpr bool kInts = false;
  static constexpr int64_t kGrain = kGrainTranscendental;
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_same_v<T, float>) return vmath::sigmoid_scalar(x);
    else return x >= 0 ? T(1) / (T(1) + std::exp(-x)) : std::exp(x) / (T(1) + std::exp(x));
  }
  void f32(const float* x, float* y, int64_t n) const { map_avx2(x, y, n, vmath::sigmoid_avx2); }
};

struct HardSigmoid {
  static constexpr bool kInts = false;
  static constexpr int64_t kGrain = kGrainCheap;
  float alpha = 0.2f, beta = 0.5f;
  template <typename T>
  T operator()(T x) const {
    T v = std::fma(static_cast<T>(alpha), x, static_cast<T>(beta));
    v = T(1) < v ? T(1) : v;
    return T(0) > v ? T(0) : v;
  }
  void f32(const float* x, float* y, int64_t n) const {
    __m256 a = _mm256_set1_ps(alpha), b = _mm256_set1_ps(beta);
    map_avx2(x, y, n, [a, b](__m256 v) {
      __m256 t = _mm256_min_ps(_mm256_set1_ps(1.0f), _mm256_fmadd_ps(a, v, b));
      return _mm256_max_ps(_mm256_setzero_ps(), t);
    });
  }
};

struct HardSwish {  // x * HardSigmoid(x) with alpha 1/6, beta 1/2
  static constexpr bool kInts = false;
  static constexpr int64_t kGrain = kGrainCheap;
  template <typename T>
  T operator()(T x) const {
    T v = std::fma(static_cast<T>(1.0f / 6.0f), x, T(0.5));
    v = T(1) < v ? T(1) : v;
    v = T(0) > v ? T(0) : v;
    return x * v;
  }
  void f32(const float* x, float* y, int64_t n) const {
    map_avx2(x, y, n, [](__m256 v) {
      __m256 t = _mm256_fmadd_ps(_mm256_set1_ps(1.0f / 6.0f), v, _mm256_set1_ps(0.5f));
      t = _mm256_max_ps(_mm256_setzero_ps(), _mm256_min_ps(_mm256_set1_ps(1.0f), t));
      return _mm256_mul_ps(v, t);
    });
  }
};

struct Gelu {
  static constexpr bool kInts = false;
  static constexpr int64_t kGrain = kGrainTranscendental;
  bool tanh_approx = false;
  static constexpr float kInvSqrt2 = 0.70710678118654752f;
  static constexpr float kSqrt2OverPi = 0.79788456080286536f;
  static constexpr float kCubic = 0.044715f;
  template <typename T>
  T operator()(T x) const {
    if (tanh_approx) {
      T inner = static_cast<T>(kSqrt2OverPi) * (x + static_cast<T>(kCubic) * x * x * x);
      T t = std::is_same_v<T, float> ? vmath::tanh_scalar(static_cast<float>(inner)) : std::tanh(inner);
      return T(0.5) * x * (T(1) + t);
    }
    T e = std::is_same_v<T, float> ? vmath::erf_scalar(static_cast<float>(x * static_cast<T>(kInvSqrt2)))
                                   : std::erf(x * static_cast<T>(kInvSqrt2));
    return T(0.5) * x * (T(1) + e);
  }
  void f32(const float* x, float* y, int64_t n) const {
    __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    if (tanh_approx) {
      map_avx2(x, y, n, [=](__m256 v) {
        __m256 v3 = _mm256_mul_ps(_mm256_mul_ps(v, v), v);
        __m256 inner = _mm256_mul_ps(_mm256_set1_ps(kSqrt2OverPi), _mm256_fmadd_ps(_mm256_set1_ps(kCubic), v3, v));
        return _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_add_ps(one, vmath::tanh_avx2(inner)));
      });
    } else {
      map_avx2(x, y, n, [=](__m256 v) {
        __m256 e = vmath::erf_avx2(_mm256_mul_ps(v, _mm256_set1_ps(kInvSqrt2)));
        return _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_add_ps(one, e));
      });
    }
  }
};

struct Elu {
  static constexpr bool kInts = false;
  static constexpr int64_t kGrain = kGrainTranscendental;
  float alpha = 1.0f;
  template <typename T>
  T operator()(T x) const { return x < T(0) ? static_cast<T>(alpha) * std::expm1(x) : x; }
};

struct Selu {
  static constexpr bool kInts = false;
  static constexpr int64_t kGrain = kGrainTranscendental;
  float alpha = 1.67326319217681884765625f, gamma = 1.05070102214813232421875f;
  template <typename T>
  T operator()(T x) const {
    T g = static_cast<T>(gamma), a = static_cast<T>(alpha);
    return x > T(0) ? g * x : g * (a * std::exp(x) - a);
  }
};

struct Celu {
  static constexpr bool kInts = false;
  static constexpr int64_t kGrain = kGrainTranscendental;
  float alpha = 1.0f;
  template <typename T>
  T operator()(T x) const {
    T a = static_cast<T>(alpha);
    return x > T(0) ? x : a * std::expm1(x / a);
  }
};

struct Softplus {  // log(1 + e^x), written to neither overflow nor lose small results
  static constexpr bool kInts = false;
  static constexpr int64_t kGrain = kGrainTranscendental;
  template <typename T>
  T operator()(T x) const { return (x > T(0) ? x : T(0)) + std::log1p(std::exp(-std::fabs(x))); }
};

struct Softsign {
  static constexpr bool kInts = false;
  static constexpr int64_t kGrain = kGrainCheap;
  template <typename T>
  T operator()(T x) const { return x / (T(1) + std::fabs(x)); }
};

struct ThresholdedRelu {
  static constexpr bool kInts = false;
  static constexpr int64_t kGrain = kGrainCheap;
  float alpha = 1.0f;
  template <typename T>
  T operator()(T x) const { return x > static_cast<T>(alpha) ? x : T(0); }
};

struct Shrink {
  static constexpr bool kInts = true;
  static constexpr int64_t kGrain = kGrainCheap;
  float bias = 0.0f, lambd = 0.5f;
  template <typename T>
  T operator()(T x) const {
    double v = static_cast<double>(x);
    if (v < -lambd) return static_cast<T>(v + bias);
    if (v > lambd) return static_cast<T>(v - bias);
    return T(0);
  }
};

struct Mish {  // x * tanh(softplus(x))
  static constexpr bool kInts = false;
  static constexpr int64_t kGrain = kGrainTranscendental;
  template <typename T>
  T operator()(T x) const { return x * std::tanh(Softplus{}(x)); }
};

}  // namespace mminfer::kernels::act
