// Binary element-wise ops and their inner loops. An inner loop gets one broadcast segment:
// n outputs, inputs advancing by stride 0 (broadcast) or 1. float32 Add/Sub/Mul/Div have AVX2
// loops for every stride pair; the scalar `operator()` is their twin.
#pragma once
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/common/vector_math.h"

namespace mminfer::kernels::binop {

// Integer arithmetic that wraps (two's complement) instead of overflowing into UB.
template <typename T>
T wrap_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <typename T>
T wrap_sub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
}
template <typename T>
T wrap_mul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;  // avoid int promotion
  return static_cast<T>(static_cast<U>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b))));
}

// Generic strided loop; the four stride cases are split so the compiler can vectorize each.
template <typename Fn, typename T, typename O>
inline void strided_loop(const Fn& fn, const T* a, int64_t sa, const T* b, int64_t sb, O* o, int64_t n) {
  if (sa && sb) {
    for (int64_t i = 0; i < n; ++i) o[i] = fn(a[i], b[i]);
  } else if (sb) {
    T av = a[0];
    for (int64_t i = 0; i < n; ++i) o[i] = fn(av, b[i]);
  } else if (sa) {
    T bv = b[0];
    for (int64_t i = 0; i < n; ++i) o[i] = fn(a[i], bv);
  } else {
    O v = fn(a[0], b[0]);
    for (int64_t i = 0; i < n; ++i) o[i] = v;
  }
}

// AVX2 loop for a float32 op given as vector and scalar lambdas (tails use masked vectors).
template <typename Vec>
inline void avx2_loop(Vec vec, const float* a, int64_t sa, const float* b, int64_t sb, float* o, int64_t n) {
  int64_t i = 0;
  __m256i m = vmath::tail_mask(n % 8);
  if (sa && sb) {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, vec(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    if (i < n) _mm256_maskstore_ps(o + i, m, vec(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m)));
  } else if (sb) {
    __m256 av = _mm256_set1_ps(a[0]);
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, vec(av, _mm256_loadu_ps(b + i)));
    if (i < n) _mm256_maskstore_ps(o + i, m, vec(av, _mm256_maskload_ps(b + i, m)));
  } else if (sa) {
    __m256 bv = _mm256_set1_ps(b[0]);
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, vec(_mm256_loadu_ps(a + i), bv));
    if (i < n) _mm256_maskstore_ps(o + i, m, vec(_mm256_maskload_ps(a + i, m), bv));
  } else {
    float v = _mm_cvtss_f32(_mm256_castps256_ps128(vec(_mm256_set1_ps(a[0]), _mm256_set1_ps(b[0]))));
    for (; i < n; ++i) o[i] = v;
  }
}

struct Add {
  static constexpr bool kBoolOut = false;
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return wrap_add(a, b);
    else return a + b;
  }
  void f32(const float* a, int64_t sa, const float* b, int64_t sb, float* o, int64_t n) const {
    avx2_loop([](__m256 x, __m256 y) { return _mm256_add_ps(x, y); }, a, sa, b, sb, o, n);
  }
};

struct Sub {
  static constexpr bool kBoolOut = false;
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return wrap_sub(a, b);
    else return a - b;
  }
  void f32(const float* a, int64_t sa, const float* b, int64_t sb, float* o, int64_t n) const {
    avx2_loop([](__m256 x, __m256 y) { return _mm256_sub_ps(x, y); }, a, sa, b, sb, o, n);
  }
};

struct Mul {
  static constexpr bool kBoolOut = false;
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return wrap_mul(a, b);
    else return a * b;
  }
  void f32(const float* a, int64_t sa, const float* b, int64_t sb, float* o, int64_t n) const {
    avx2_loop([](__m256 x, __m256 y) { return _mm256_mul_ps(x, y); }, a, sa, b, sb, o, n);
  }
};

struct Div {
  static constexpr bool kBoolOut = false;
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      // Integer division by zero has no value; give 0 rather than trap. MIN / -1 wraps.
      if (b == 0) return 0;
      if constexpr (std::is_signed_v<T>) {
        if (b == static_cast<T>(-1)) return wrap_sub(T(0), a);
      }
      return static_cast<T>(a / b);
    } else {
      return a / b;
    }
  }
  void f32(const float* a, int64_t sa, const float* b, int64_t sb, float* o, int64_t n) const {
    avx2_loop([](__m256 x, __m256 y) { return _mm256_div_ps(x, y); }, a, sa, b, sb, o, n);
  }
};

struct Mod {
  static constexpr bool kBoolOut = false;
  bool fmod = false;  // true: sign of the dividend (C fmod); false: sign of the divisor (Python)
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      T r = std::fmod(a, b);
      if (!fmod && r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    } else {
      if (b == 0) return 0;
      if constexpr (std::is_signed_v<T>) {
        if (b == static_cast<T>(-1)) return 0;
      }
      T r = static_cast<T>(a % b);
      if constexpr (std::is_signed_v<T>) {
        if (!fmod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
      }
      return r;
    }
  }
};

struct BitShift {
  static constexpr bool kBoolOut = false;
  bool left = true;
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b >= static_cast<T>(sizeof(T) * 8)) return 0;  // shifting out every bit; C++ would be UB
      return left ? static_cast<T>(a << b) : static_cast<T>(a >> b);
    } else {
      return a;  // never registered for floats
    }
  }
};

// Logical ops on bool storage (bytes holding 0 or 1).
struct And {
  static constexpr bool kBoolOut = true;
  template <typename T>
  bool operator()(T a, T b) const { return a && b; }
};
struct Or {
  static constexpr bool kBoolOut = true;
  template <typename T>
  bool operator()(T a, T b) const { return a || b; }
};
struct Xor {
  static constexpr bool kBoolOut = true;
  template <typename T>
  bool operator()(T a, T b) const { return (a != 0) != (b != 0); }
};

struct Equal {
  static constexpr bool kBoolOut = true;
  template <typename T>
  bool operator()(T a, T b) const { return a == b; }
};
struct Greater {
  static constexpr bool kBoolOut = true;
  template <typename T>
  bool operator()(T a, T b) const { return a > b; }
};
struct GreaterOrEqual {
  static constexpr bool kBoolOut = true;
  template <typename T>
  bool operator()(T a, T b) const { return a >= b; }
};
struct Less {
  static constexpr bool kBoolOut = true;
  template <typename T>
  bool operator()(T a, T b) const { return a < b; }
};
struct LessOrEqual {
  static constexpr bool kBoolOut = true;
  template <typename T>
  bool operator()(T a, T b) const { return a <= b; }
};

struct PRelu {  // y = x < 0 ? slope * x : x
  static constexpr bool kBoolOut = false;
  template <typename T>
  T operator()(T x, T slope) const {
    if constexpr (std::is_integral_v<T>) return x < T(0) ? wrap_mul(slope, x) : x;
    else return x < T(0) ? slope * x : x;
  }
  void f32(const float* a, int64_t sa, const float* b, int64_t sb, float* o, int64_t n) const {
    avx2_loop(
        [](__m256 x, __m256 s) {
          return _mm256_blendv_ps(x, _mm256_mul_ps(s, x), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
        },
        a, sa, b, sb, o, n);
  }
};

// Max / Min propagate NaN like numpy.maximum / numpy.minimum.
struct Max {
  static constexpr bool kBoolOut = false;
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
    }
    return a > b ? a : b;
  }
};
struct Min {
  static constexpr bool kBoolOut = false;
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
    }
    return a < b ? a : b;
  }
};

}  // namespace mminfer::kernels::binop
