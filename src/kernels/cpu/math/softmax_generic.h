// Softmax / log-softmax along k of a [outer, k, inner] view for float64, float16 and
// bfloat16 (computed in double / float), with the same non-finite rules as softmax_simd.h.
#pragma once
#include <cmath>
#include <limits>
#include <vector>

#include "core/parallel.h"

namespace mminfer::kernels::softmax_generic {

template <typename N>
void softmax(const typename N::Storage* x, typename N::Storage* y, int64_t outer, int64_t k, int64_t inner,
             bool log) {
  using C = typename N::Compute;
  if (outer <= 0 || k <= 0 || inner <= 0) return;
  parallel_for(outer * inner, std::max<int64_t>(1, 4096 / k), [&](int64_t b, int64_t e) {
    std::vector<C> v(static_cast<size_t>(k));
    for (int64_t t = b; t < e; ++t) {
      int64_t o = t / inner, j = t % inner;
      const typename N::Storage* xs = x + o * k * inner + j;
      typename N::Storage* ys = y + o * k * inner + j;
      C m = -std::numeric_limits<C>::infinity();
      for (int64_t i = 0; i < k; ++i) {
        v[i] = N::load(xs[i * inner]);
        if (v[i] > m || std::isnan(v[i])) m = v[i];
        if (std::isnan(m)) break;
      }
      if (std::isnan(m)) {
        for (int64_t i = 0; i < k; ++i) ys[i * inner] = N::store(std::numeric_limits<C>::quiet_NaN());
        continue;
      }
      if (std::isinf(m)) {
        int64_t count = 0;
        for (int64_t i = 0; i < k; ++i) count += m > 0 ? v[i] == m : 1;
        C hit = log ? -std::log(static_cast<C>(count)) : C(1) / static_cast<C>(count);
        C miss = log ? -std::numeric_limits<C>::infinity() : C(0);
        for (int64_t i = 0; i < k; ++i) ys[i * inner] = N::store(m < 0 || v[i] == m ? hit : miss);
        continue;
      }
      C s = 0;
      for (int64_t i = 0; i < k; ++i) s += std::exp(v[i] - m);
      if (log) {
        C ls = std::log(s);
        for (int64_t i = 0; i < k; ++i) ys[i * inner] = N::store((v[i] - m) - ls);
      } else {
        C inv = C(1) / s;
        for (int64_t i = 0; i < k; ++i) ys[i * inner] = N::store(std::exp(v[i] - m) * inv);
      }
    }
  });
}

}  // namespace mminfer::kernels::softmax_generic
