// The int8 MatMulNBits loop (nbits_int8_dot.h), written once over an ISA's operations. Each ISA's
// file defines its Ops and includes this; everything here has internal linkage, so the copies
// built with different instruction sets never meet at link time.
//
// Ops provides: VI / VF (integer and float vectors), kChunk (K values per vector), kMaxRows,
// cols_for(rows), load_codes<Bits>(p) (kChunk weight codes as u8), load_i / load_f, dot<Bits>
// (u8 · s8 -> 32-bit lanes of 4 products), cvt, mul, fmadd, zero, hsum, lane_index(p) and
// block_scales(p, count, index) (per lane, the scale of the block the lane covers).
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/quantization/nbits_int8_dot.h"

namespace mminfer::kernels {
namespace {

// acc[r][j] += chunk c's products of row r and column j, scaled per lane.
template <class Ops, int Bits, int MR, int NC>
__attribute__((always_inline)) inline void int8_chunk(const typename Ops::VI* wv, const typename Ops::VF* sw, const int8_t* const* ap,
                       const float* const* sp, int64_t c, typename Ops::VF (*acc)[NC]) {
  constexpr int64_t CH = Ops::kChunk, L = CH / 4;
  _Pragma("GCC unroll 8")
  for (int r = 0; r < MR; ++r) {
    const typename Ops::VI av = Ops::load_i(ap[r] + c * CH);
    const typename Ops::VF sa = Ops::load_f(sp[r] + c * L);
    _Pragma("GCC unroll 8")
    for (int j = 0; j < NC; ++j)
      acc[r][j] = Ops::fmadd(Ops::cvt(Ops::template dot<Bits>(wv[j], av)), Ops::mul(sw[j], sa), acc[r][j]);
  }
}

// Rows [m0, m0 + MR) times columns [n0, n0 + NC).
template <class Ops, int Bits, int MR, int NC>
void int8_tile(const NBitsWeights& w, const Int8Rows& q, int64_t m0, int64_t n0, float* y, float* zs) {
  using VI = typename Ops::VI;
  using VF = typename Ops::VF;
  constexpr int64_t CH = Ops::kChunk, CB = CH * Bits / 8;
  const int64_t kb = w.k_blocks(), bs = w.block_size, row_bytes = kb * w.blob_bytes(), lanes = q.kpad / 4;
  const int64_t chunk_blocks = bs >= CH ? 1 : CH / bs;
  // Every chunk starts on a block boundary (or inside one block), so the lanes' blocks relative
  // to the chunk's first are those of chunk 0.
  const VI index = Ops::lane_index(q.lane_block.data());
  const uint8_t* wp[NC];
  const float* sc[NC];
  _Pragma("GCC unroll 8")
  for (int j = 0; j < NC; ++j) {
    wp[j] = w.packed + (n0 + j) * row_bytes;
    sc[j] = w.scales + (n0 + j) * kb;
  }
  const int8_t* ap[MR];
  const float* sp[MR];
  _Pragma("GCC unroll 8")
  for (int r = 0; r < MR; ++r) {
    ap[r] = q.codes.data() + (m0 + r) * q.kpad;
    sp[r] = q.lane_scale.data() + (m0 + r) * lanes;
  }
  VF acc[MR][NC];
  _Pragma("GCC unroll 8")
  for (int r = 0; r < MR; ++r)
    _Pragma("GCC unroll 8")
    for (int j = 0; j < NC; ++j) acc[r][j] = Ops::zero();
  const int64_t whole = row_bytes / CB;  // chunks whose weight bytes and blocks all exist
  VI wv[NC];
  VF sw[NC];
  for (int64_t c = 0; c < whole; ++c) {
    const int64_t b0 = c * CH / bs;
    _Pragma("GCC unroll 8")
    for (int j = 0; j < NC; ++j) {
      // The same place in the next tile's columns: the weight is one stream, read once, and
      // the hardware prefetcher alone leaves the loop waiting on memory.
      _mm_prefetch(reinterpret_cast<const char*>(wp[j] + c * CB + NC * row_bytes), _MM_HINT_T0);
      wv[j] = Ops::template load_codes<Bits>(wp[j] + c * CB);
      sw[j] = Ops::block_scales(sc[j] + b0, static_cast<int>(chunk_blocks), index);
    }
    int8_chunk<Ops, Bits, MR, NC>(wv, sw, ap, sp, c, acc);
  }
  if (whole * CH < kb * bs) {  // the rows' last, partial chunk: never read past the weight
    const int64_t c = whole, b0 = c * CH / bs;
    _Pragma("GCC unroll 8")
    for (int j = 0; j < NC; ++j) {
      alignas(64) uint8_t tail[64] = {};
      std::memcpy(tail, wp[j] + c * CB, static_cast<size_t>(row_bytes - c * CB));
      wv[j] = Ops::template load_codes<Bits>(tail);
      sw[j] = Ops::block_scales(sc[j] + b0, static_cast<int>(std::min(chunk_blocks, kb - b0)), index);
    }
    int8_chunk<Ops, Bits, MR, NC>(wv, sw, ap, sp, c, acc);
  }
  float corr[MR];
  _Pragma("GCC unroll 8")
  for (int j = 0; j < NC; ++j) {
    nbits_zero_point_corrections(w, q, n0 + j, m0, MR, zs, corr);
    _Pragma("GCC unroll 8")
    for (int r = 0; r < MR; ++r) y[(m0 + r) * w.N + n0 + j] = Ops::hsum(acc[r][j]) - corr[r];
  }
}

template <class Ops, int Bits, int MR>
void int8_columns(const NBitsWeights& w, const Int8Rows& q, int64_t m0, int64_t n0, int64_t n1, float* y, float* zs) {
  constexpr int NC = Ops::cols_for(MR);
  int64_t n = n0;
  for (; n + NC <= n1; n += NC) int8_tile<Ops, Bits, MR, NC>(w, q, m0, n, y, zs);
  for (; n < n1; ++n) int8_tile<Ops, Bits, MR, 1>(w, q, m0, n, y, zs);
}

template <class Ops, int Bits, int MR = 1>
void int8_rows_of(const NBitsWeights& w, const Int8Rows& q, int64_t m0, int64_t rows, int64_t n0, int64_t n1, float* y,
                  float* zs) {
  if constexpr (MR < Ops::kMaxRows) {
    if (rows > MR) return int8_rows_of<Ops, Bits, MR + 1>(w, q, m0, rows, n0, n1, y, zs);
  }
  int8_columns<Ops, Bits, MR>(w, q, m0, n0, n1, y, zs);
}

// Columns in groups small enough to stay in cache while every row tile passes over them: the
// weight is read from memory once whatever M is.
template <class Ops, int Bits>
void int8_product(const NBitsWeights& w, const Int8Rows& q, int64_t n0, int64_t n1, float* y) {
  thread_local std::vector<float> zs;
  zs.resize(static_cast<size_t>(w.k_blocks()));
  constexpr int64_t kGroup = 32;
  for (int64_t g = n0; g < n1; g += kGroup) {
    const int64_t g1 = std::min(n1, g + kGroup);
    for (int64_t m0 = 0; m0 < q.M; m0 += Ops::kMaxRows)
      int8_rows_of<Ops, Bits>(w, q, m0, std::min<int64_t>(Ops::kMaxRows, q.M - m0), g, g1, y, zs.data());
  }
}

template <class Ops>
void int8_dispatch(const NBitsWeights& w, const Int8Rows& q, int64_t n0, int64_t n1, float* y) {
  if (w.bits == 4)
    int8_product<Ops, 4>(w, q, n0, n1, y);
  else
    int8_product<Ops, 8>(w, q, n0, n1, y);
}

}  // namespace
}  // namespace mminfer::kernels
