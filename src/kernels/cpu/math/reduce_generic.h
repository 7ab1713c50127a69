// Reduce* over a [outer, k, inner] view for every numeric dtype: the plain reference path
// (float32 takes reduce_simd instead). Integers accumulate in 64 bits with wrap-around,
// float16/bfloat16 in float; L2, LogSum and LogSumExp of integers go through double.
#pragma once
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/common/numeric_visit.h"
#include "kernels/cpu/math/reduce_simd.h"

namespace mminfer::kernels::reduce_generic {

using reduce_simd::ReduceKind;

template <typename C>
using Acc = std::conditional_t<std::is_floating_point_v<C>, C,
                               std::conditional_t<std::is_signed_v<C>, int64_t, uint64_t>>;

template <typename A>
A wrap_add(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    return static_cast<A>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  } else {
    return a + b;
  }
}

template <typename A>
A wrap_mul(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    return static_cast<A>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  } else {
    return a * b;
  }
}

template <typename A>
A magnitude(A a) {
  if constexpr (std::is_signed_v<A>) {
    return a < 0 ? static_cast<A>(0 - static_cast<uint64_t>(a)) : a;
  } else {
    return a;
  }
}

template <typename A>
bool is_nan(A v) {
  if constexpr (std::is_floating_point_v<A>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

// Integer max/min start from the limits of the element type C, not of the wider accumulator,
// so an empty set stores the element type's lowest / highest value.
template <typename A, typename C>
A identity(ReduceKind k) {
  constexpr bool fp = std::is_floating_point_v<A>;
  switch (k) {
    case ReduceKind::kProd: return A(1);
    case ReduceKind::kMax: case ReduceKind::kLogSumExp:
      return fp ? -std::numeric_limits<A>::infinity() : static_cast<A>(std::numeric_limits<C>::lowest());
    case ReduceKind::kMin: return fp ? std::numeric_limits<A>::infinity() : static_cast<A>(std::numeric_limits<C>::max());
    default: return A(0);
  }
}

template <typename A>
A step(ReduceKind k, A acc, A x) {
  switch (k) {
    case ReduceKind::kSumSquare: case ReduceKind::kL2: return wrap_add(acc, wrap_mul(x, x));
    case ReduceKind::kL1: return wrap_add(acc, magnitude(x));
    case ReduceKind::kProd: return wrap_mul(acc, x);
    case ReduceKind::kMax: case ReduceKind::kLogSumExp: return (x > acc || is_nan(x)) ? x : acc;
    case ReduceKind::kMin: return (x < acc || is_nan(x)) ? x : acc;
    default: return wrap_add(acc, x);
  }
}

// Converts a finished value to the storage type; integers saturate instead of overflowing.
template <typename N, typename V>
typename N::Storage to_storage(V v) {
  using C = typename N::Compute;
  if constexpr (std::is_floating_point_v<C> || std::is_integral_v<V>) {
    return N::store(static_cast<C>(v));
  } else {
    if (std::isnan(v)) return N::store(C(0));
    if (v <= static_cast<V>(std::numeric_limits<C>::lowest())) return N::store(std::numeric_limits<C>::lowest());
    if (v >= static_cast<V>(std::numeric_limits<C>::max())) return N::store(std::numeric_limits<C>::max());
    return N::store(static_cast<C>(v));
  }
}

// y[o, j] = reduction over r < k of x[o, r, j].
template <typename N>
void reduce(ReduceKind kind, const typename N::Storage* x, int64_t outer, int64_t k, int64_t inner,
            typename N::Storage* y) {
  using A = Acc<typename N::Compute>;
  using F = std::conditional_t<std::is_floating_point_v<A>, A, double>;  // for exp/log/sqrt
  constexpr int64_t kBlock = 256;
  int64_t blocks = (inner + kBlock - 1) / kBlock;
  int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, k * std::min(inner, kBlock)));
  parallel_for(outer * blocks, grain, [&](int64_t b, int64_t e) {
    std::vector<A> acc(static_cast<size_t>(std::min(inner, kBlock)));
    std::vector<F> sums(kind == ReduceKind::kLogSumExp ? acc.size() : 0);
    for (int64_t t = b; t < e; ++t) {
      int64_t o = t / blocks, j0 = (t % blocks) * kBlock, w = std::min(kBlock, inner - j0);
      const typename N::Storage* base = x + o * k * inner + j0;
      std::fill(acc.begin(), acc.begin() + w, identity<A, typename N::Compute>(kind));
      for (int64_t r = 0; r < k; ++r)
        for (int64_t j = 0; j < w; ++j) acc[j] = step(kind, acc[j], static_cast<A>(N::load(base[r * inner + j])));
      typename N::Storage* out = y + o * inner + j0;
      switch (kind) {
        case ReduceKind::kMean:
          for (int64_t j = 0; j < w; ++j) {
            if constexpr (std::is_floating_point_v<A>) {
              out[j] = to_storage<N>(acc[j] / static_cast<A>(k));
            } else {
              out[j] = to_storage<N>(k > 0 ? static_cast<A>(acc[j] / static_cast<A>(k)) : A(0));
            }
          }
          break;
        case ReduceKind::kL2:
          for (int64_t j = 0; j < w; ++j) out[j] = to_storage<N>(std::sqrt(static_cast<F>(acc[j])));
          break;
        case ReduceKind::kLogSum:
          for (int64_t j = 0; j < w; ++j) out[j] = to_storage<N>(std::log(static_cast<F>(acc[j])));
          break;
        case ReduceKind::kLogSumExp: {
          std::fill(sums.begin(), sums.begin() + w, F(0));
          for (int64_t r = 0; r < k; ++r)
            for (int64_t j = 0; j < w; ++j)
              sums[j] += std::exp(static_cast<F>(N::load(base[r * inner + j])) - static_cast<F>(acc[j]));
          for (int64_t j = 0; j < w; ++j) {
            F m = static_cast<F>(acc[j]);
            bool finite = std::is_floating_point_v<A> ? std::isfinite(m) : k > 0;
            if constexpr (!std::is_floating_point_v<A>) {
              if (k == 0) m = -std::numeric_limits<F>::infinity();
            }
            out[j] = to_storage<N>(finite ? m + std::log(sums[j]) : m);
          }
          break;
        }
        default:
          for (int64_t j = 0; j < w; ++j) out[j] = to_storage<N>(acc[j]);
      }
    }
  });
}

}  // namespace mminfer::kernels::reduce_generic
