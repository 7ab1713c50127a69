// The panel loop of panel_dots.h over one ISA's vector ops (`Ops`: V, kLanes, zero, load from
// float or int8, broadcast, fmadd, add, store), so the AVX2 and AVX-512 kernels are one loop. A
// panel's 16 lanes are 16 / kLanes vectors; each lane keeps four partial sums over k mod 4, then
// adds them as (s0 + s1) + (s2 + s3): panel_row_dot's order.
#pragma once
#include <cstdint>

#include "kernels/cpu/gemm/panel_dots.h"

namespace mminfer::kernels {

template <typename Ops, typename T>
void panel_dots_body(const T* panels, int64_t d, const float* x, int64_t first, int64_t last, float* out) {
  using V = typename Ops::V;
  for (int64_t p = first; p < last; ++p)
    for (int64_t part = 0; part < kPanelRows; part += Ops::kLanes) {
      const T* w = panels + p * d * kPanelRows + part;
      V s0 = Ops::zero(), s1 = s0, s2 = s0, s3 = s0;
      int64_t k = 0;
      for (; k + 4 <= d; k += 4) {
        s0 = Ops::fmadd(Ops::load(w + k * kPanelRows), Ops::broadcast(x + k), s0);
        s1 = Ops::fmadd(Ops::load(w + (k + 1) * kPanelRows), Ops::broadcast(x + k + 1), s1);
        s2 = Ops::fmadd(Ops::load(w + (k + 2) * kPanelRows), Ops::broadcast(x + k + 2), s2);
        s3 = Ops::fmadd(Ops::load(w + (k + 3) * kPanelRows), Ops::broadcast(x + k + 3), s3);
      }
      if (k < d) s0 = Ops::fmadd(Ops::load(w + k * kPanelRows), Ops::broadcast(x + k), s0), ++k;
      if (k < d) s1 = Ops::fmadd(Ops::load(w + k * kPanelRows), Ops::broadcast(x + k), s1), ++k;
      if (k < d) s2 = Ops::fmadd(Ops::load(w + k * kPanelRows), Ops::broadcast(x + k), s2);
      Ops::store(out + (p - first) * kPanelRows + part, Ops::add(Ops::add(s0, s1), Ops::add(s2, s3)));
    }
}

}  // namespace mminfer::kernels
