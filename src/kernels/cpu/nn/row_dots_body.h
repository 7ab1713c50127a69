// The tile loop of row_dots.h over one ISA's vector ops (`Ops`: V, kLanes, kTileA, kTileB, zero,
// load, fmadd, sum), so the AVX2 and AVX-512 kernels are one loop. A tile multiplies kTileA rows
// of `a` with kTileB rows of `b` from registers: each step loads kTileA + kTileB vectors for
// kTileA x kTileB multiply-adds. Every output sums its lanes, then the columns past the last whole
// vector, so its bits depend only on c and the ISA.
#pragma once
#include <algorithm>
#include <cstdint>

namespace mminfer::kernels {

template <typename Ops, int RA, int RB>
void row_dots_tile(const float* const* x, const float* const* y, int64_t c, float* out, int64_t ldo) {
  using V = typename Ops::V;
  V acc[RA][RB];
  for (int i = 0; i < RA; ++i)
    for (int j = 0; j < RB; ++j) acc[i][j] = Ops::zero();
  int64_t k = 0;
  for (; k + Ops::kLanes <= c; k += Ops::kLanes) {
    V yv[RB];
    for (int j = 0; j < RB; ++j) yv[j] = Ops::load(y[j] + k);
    for (int i = 0; i < RA; ++i) {
      const V xv = Ops::load(x[i] + k);
      for (int j = 0; j < RB; ++j) acc[i][j] = Ops::fmadd(xv, yv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < RA; ++i)
    for (int j = 0; j < RB; ++j) {
      float s = Ops::sum(acc[i][j]);
      for (int64_t e = k; e < c; ++e) s += x[i][e] * y[j][e];
      out[i * ldo + j] = s;
    }
}

// One tile of ra x rb rows (1 <= ra <= kTileA, 1 <= rb <= kTileB), through the instance of its size.
template <typename Ops, int RA = Ops::kTileA, int RB = Ops::kTileB>
void row_dots_tile_of(int ra, int rb, const float* const* x, const float* const* y, int64_t c, float* out,
                      int64_t ldo) {
  if constexpr (RA > 1) {
    if (ra < RA) return row_dots_tile_of<Ops, RA - 1, RB>(ra, rb, x, y, c, out, ldo);
  }
  if constexpr (RB > 1) {
    if (rb < RB) return row_dots_tile_of<Ops, RA, RB - 1>(ra, rb, x, y, c, out, ldo);
  }
  row_dots_tile<Ops, RA, RB>(x, y, c, out, ldo);
}

template <typename Ops>
void row_dots_body(const float* m, int64_t c, const int64_t* a, int64_t na, const int64_t* b, int64_t nb,
                   float* out) {
  for (int64_t i0 = 0; i0 < na; i0 += Ops::kTileA) {
    const int ra = static_cast<int>(std::min<int64_t>(Ops::kTileA, na - i0));
    const float* x[Ops::kTileA];
    for (int i = 0; i < ra; ++i) x[i] = m + a[i0 + i] * c;
    for (int64_t j0 = 0; j0 < nb; j0 += Ops::kTileB) {
      const int rb = static_cast<int>(std::min<int64_t>(Ops::kTileB, nb - j0));
      const float* y[Ops::kTileB];
      for (int j = 0; j < rb; ++j) y[j] = m + b[j0 + j] * c;
      row_dots_tile_of<Ops>(ra, rb, x, y, c, out + i0 * nb + j0, nb);
    }
  }
}

}  // namespace mminfer::kernels
