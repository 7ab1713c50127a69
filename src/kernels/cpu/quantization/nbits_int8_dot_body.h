// The int8 MatMulNBits loop (nbits_int8_dot.h), written once over an ISA's operations. Each ISA's
// file defines its Ops and includes this; everything here has internal linkage, so the copies
// built with different instruction sets never meet at link time.
//
// Ops provides: VI / VF (integer and float vectors), kChunk (weight bytes per vector), kLanes
// (floats per VF), kMaxRows, cols_for(rows), load_u8(p) (kChunk bytes), load_u8_first(p, bytes)
// (the first bytes, a multiple of 4, zeros after), nibbles(v, lo, hi) (a vector's low and high
// nibbles as u8), load_i / load_f, load_f_first(p, count) (the first count floats, zeros after),
// u8_lanes(p) (kLanes bytes as floats), dot8(w, a) (u8 · s8 -> 32-bit lanes of 4 products),
// dot4(lo, a_lo, hi, a_hi) (both products summed), cvt, mul, fmadd, fnmadd, set1, zero, hsum,
// reduce4 (four vectors' sums as one __m128), lane_index(p) and block_scales(p, count, index)
// (per lane, the scale of the block the lane covers).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/quantization/nbits_int8_dot.h"

namespace mminfer::kernels {
namespace {

// What one step of the loop covers: kChunk weight bytes, which hold kChunk values of K at 8 bits
// and twice that at 4 (the low nibbles, then the high ones: nbits_int8_dot.h).
template <class Ops, int Bits>
struct Step {
  static constexpr int64_t kBytes = Ops::kChunk;
  static constexpr int64_t kValues = Bits == 4 ? 2 * Ops::kChunk : Ops::kChunk;
};

// One column's weight codes for a step: [lo, hi] nibbles at 4 bits, the bytes at 8.
template <class Ops, int Bits>
struct Codes {
  typename Ops::VI v[Bits == 4 ? 2 : 1];
};

template <class Ops, int Bits>
__attribute__((always_inline)) inline Codes<Ops, Bits> load_codes(const uint8_t* p) {
  Codes<Ops, Bits> c;
  if constexpr (Bits == 4)
    Ops::nibbles(Ops::load_u8(p), c.v[0], c.v[1]);
  else
    c.v[0] = Ops::load_u8(p);
  return c;
}

// acc[r][j] += step c's products of row r and column j, scaled per lane. At 4 bits the low and
// high nibbles' lanes cover the same blocks, so their integer products add before the scaling.
template <class Ops, int Bits, int MR, int NC>
__attribute__((always_inline)) inline void int8_chunk(const Codes<Ops, Bits>* wv, const typename Ops::VF* sw, const int8_t* const* ap,
                                                     const float* const* sp, int64_t c, typename Ops::VF (*acc)[NC]) {
  using S = Step<Ops, Bits>;
  _Pragma("GCC unroll 8")
  for (int r = 0; r < MR; ++r) {
    const int8_t* a = ap[r] + c * S::kValues;
    const typename Ops::VF sa = Ops::load_f(sp[r] + c * (S::kValues / 4));
    if constexpr (Bits == 4) {
      const typename Ops::VI lo = Ops::load_i(a), hi = Ops::load_i(a + Ops::kChunk);
      _Pragma("GCC unroll 8")
      for (int j = 0; j < NC; ++j)
        acc[r][j] = Ops::fmadd(Ops::cvt(Ops::dot4(wv[j].v[0], lo, wv[j].v[1], hi)), Ops::mul(sw[j], sa), acc[r][j]);
    } else {
      const typename Ops::VI av = Ops::load_i(a);
      _Pragma("GCC unroll 8")
      for (int j = 0; j < NC; ++j) acc[r][j] = Ops::fmadd(Ops::cvt(Ops::dot8(wv[j].v[0], av)), Ops::mul(sw[j], sa), acc[r][j]);
    }
  }
}

// The zero points of blocks [b0, b0 + count) of column n as float lanes (count <= kLanes, b0 a
// multiple of kLanes). A whole vector's bytes are loaded where the array goes on that far: bytes
// past the column's own belong to the next column and meet a zero scale in subtract_zero_points.
// kb: w.k_blocks(), passed in because it costs a division.
template <class Ops>
__attribute__((always_inline)) inline typename Ops::VF zero_point_lanes(const NBitsWeights& w, int64_t kb, int64_t n, int64_t b0,
                                                                       int count) {
  constexpr int L = Ops::kLanes;
  if (w.zp_float) return Ops::load_f_first(w.zp_float + n * kb + b0, count);
  if (!w.zp_packed) return Ops::set1(static_cast<float>(1 << (w.bits - 1)));
  const int64_t row = (kb * w.bits + 7) / 8, end = w.N * row;
  alignas(16) uint8_t codes[16] = {};
  if (w.bits == 8) {
    const int64_t at = n * row + b0;
    if (at + L <= end)
      std::memcpy(codes, w.zp_packed + at, L);
    else
      for (int i = 0; i < count; ++i) codes[i] = w.zp_packed[at + i];
  } else {  // 4 bits: blocks 2i and 2i + 1 in the low and high nibble of byte i
    const int64_t at = n * row + b0 / 2;
    uint64_t raw = 0;
    if (at + 8 <= end)
      std::memcpy(&raw, w.zp_packed + at, 8);
    else
      for (int i = 0; i < (count + 1) / 2; ++i) raw |= static_cast<uint64_t>(w.zp_packed[at + i]) << (8 * i);
    const __m128i v = _mm_cvtsi64_si128(static_cast<long long>(raw)), low4 = _mm_set1_epi8(0x0f);
    _mm_store_si128(reinterpret_cast<__m128i*>(codes),
                    _mm_unpacklo_epi8(_mm_and_si128(v, low4), _mm_and_si128(_mm_srli_epi16(v, 4), low4)));
  }
  return Ops::u8_lanes(codes);
}

// acc[r][j] -= sum_b s_w[n, b] * zp[n, b] * block_sum[m, b] for column n = n0 + j and row
// m = m0 + r, as lanes of the accumulator (hsum adds them in): a vector of blocks at a time,
// each column's s_w * zp lanes shared by all the tile's rows.
template <class Ops, int MR, int NC>
__attribute__((always_inline)) inline void subtract_zero_points(const NBitsWeights& w, int64_t kb, const Int8Rows& q, int64_t m0,
                                                               int64_t n0, typename Ops::VF (*acc)[NC]) {
  using VF = typename Ops::VF;
  constexpr int L = Ops::kLanes;
  for (int64_t b0 = 0; b0 < kb; b0 += L) {
    const int count = static_cast<int>(std::min<int64_t>(L, kb - b0));
    VF sums[MR];
    _Pragma("GCC unroll 8")
    for (int r = 0; r < MR; ++r) sums[r] = Ops::load_f_first(q.block_sum.data() + (m0 + r) * kb + b0, count);
    _Pragma("GCC unroll 8")
    for (int j = 0; j < NC; ++j) {
      const VF sz = Ops::mul(Ops::load_f_first(w.scales + (n0 + j) * kb + b0, count), zero_point_lanes<Ops>(w, kb, n0 + j, b0, count));
      _Pragma("GCC unroll 8")
      for (int r = 0; r < MR; ++r) acc[r][j] = Ops::fnmadd(sz, sums[r], acc[r][j]);
    }
  }
}

// Rows [m0, m0 + MR) times columns [n0, n0 + NC).
template <class Ops, int Bits, int MR, int NC>
void int8_tile(const NBitsWeights& w, const Int8Rows& q, int64_t m0, int64_t n0, float* y) {
  using VI = typename Ops::VI;
  using VF = typename Ops::VF;
  constexpr int64_t CH = Step<Ops, Bits>::kValues, CB = Step<Ops, Bits>::kBytes;
  const int64_t kb = w.k_blocks(), bs = w.block_size, row_bytes = kb * w.blob_bytes(), lanes = q.kpad / 4;
  const int64_t chunk_blocks = bs >= CH ? 1 : CH / bs;
  const int block_shift = __builtin_ctzll(static_cast<unsigned long long>(bs));  // block sizes are powers of two
  // The scales (and zero points) of the columns four tiles ahead: a stream of their own, which
  // the hardware prefetcher does not follow in time either. Addresses as integers: past the last
  // column they point nowhere, which a prefetch ignores.
  const uintptr_t ahead = reinterpret_cast<uintptr_t>(w.scales) + static_cast<uintptr_t>((n0 + 4 * NC) * kb) * sizeof(float);
  for (int64_t i = 0; i < NC * kb; i += 16) _mm_prefetch(reinterpret_cast<const char*>(ahead + static_cast<uintptr_t>(i) * sizeof(float)), _MM_HINT_T0);
  if (w.zp_packed)
    _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(w.zp_packed) +
                                               static_cast<uintptr_t>((n0 + 4 * NC) * ((kb * w.bits + 7) / 8))),
                 _MM_HINT_T0);
  // Every step starts on a block boundary (or inside one block), so the lanes' blocks relative
  // to the step's first are those of step 0.
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
  Codes<Ops, Bits> wv[NC];
  VF sw[NC];
  for (int64_t c = 0; c < whole; ++c) {
    const int64_t b0 = (c * CH) >> block_shift;
    _Pragma("GCC unroll 8")
    for (int j = 0; j < NC; ++j) {
      // Four tiles ahead in the same column: the weight is one stream, read once, and the
      // hardware prefetcher alone leaves the loop waiting on memory.
      _mm_prefetch(reinterpret_cast<const char*>(wp[j] + c * CB + 4 * NC * row_bytes), _MM_HINT_T0);
      wv[j] = load_codes<Ops, Bits>(wp[j] + c * CB);
      sw[j] = Ops::block_scales(sc[j] + b0, static_cast<int>(chunk_blocks), index);
    }
    int8_chunk<Ops, Bits, MR, NC>(wv, sw, ap, sp, c, acc);
  }
  if (whole * CH < kb * bs) {  // the rows' last, partial step: never read past the weight
    const int64_t c = whole, b0 = (c * CH) >> block_shift;
    _Pragma("GCC unroll 8")
    for (int j = 0; j < NC; ++j) {
      const typename Ops::VI v = Ops::load_u8_first(wp[j] + c * CB, static_cast<int>(row_bytes - c * CB));
      if constexpr (Bits == 4)
        Ops::nibbles(v, wv[j].v[0], wv[j].v[1]);
      else
        wv[j].v[0] = v;
      sw[j] = Ops::block_scales(sc[j] + b0, static_cast<int>(std::min(chunk_blocks, kb - b0)), index);
    }
    int8_chunk<Ops, Bits, MR, NC>(wv, sw, ap, sp, c, acc);
  }
  subtract_zero_points<Ops, MR, NC>(w, kb, q, m0, n0, acc);
  _Pragma("GCC unroll 8")
  for (int r = 0; r < MR; ++r) {
    if constexpr (NC == 4) {
      _mm_storeu_ps(y + (m0 + r) * w.N + n0, Ops::reduce4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]));
    } else {
      _Pragma("GCC unroll 8")
      for (int j = 0; j < NC; ++j) y[(m0 + r) * w.N + n0 + j] = Ops::hsum(acc[r][j]);
    }
  }
}

template <class Ops, int Bits, int MR>
void int8_columns(const NBitsWeights& w, const Int8Rows& q, int64_t m0, int64_t n0, int64_t n1, float* y) {
  constexpr int NC = Ops::cols_for(MR);
  int64_t n = n0;
  for (; n + NC <= n1; n += NC) int8_tile<Ops, Bits, MR, NC>(w, q, m0, n, y);
  for (; n < n1; ++n) int8_tile<Ops, Bits, MR, 1>(w, q, m0, n, y);
}

template <class Ops, int Bits, int MR = 1>
void int8_rows_of(const NBitsWeights& w, const Int8Rows& q, int64_t m0, int64_t rows, int64_t n0, int64_t n1,
                  float* y) {
  if constexpr (MR < Ops::kMaxRows) {
    if (rows > MR) return int8_rows_of<Ops, Bits, MR + 1>(w, q, m0, rows, n0, n1, y);
  }
  int8_columns<Ops, Bits, MR>(w, q, m0, n0, n1, y);
}

// Columns in groups small enough to stay in cache while every row tile passes over them: the
// weight is read from memory once whatever M is.
template <class Ops, int Bits>
void int8_product(const NBitsWeights& w, const Int8Rows& q, int64_t n0, int64_t n1, float* y) {
  constexpr int64_t kGroup = 32;
  for (int64_t g = n0; g < n1; g += kGroup) {
    const int64_t g1 = std::min(n1, g + kGroup);
    for (int64_t m0 = 0; m0 < q.M; m0 += Ops::kMaxRows)
      int8_rows_of<Ops, Bits>(w, q, m0, std::min<int64_t>(Ops::kMaxRows, q.M - m0), g, g1, y);
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
