// The tiled int8 MatMulNBits product (nbits_tiled.h) on AVX-512 VNNI. For R rows of A and one
// tile: per block, each row's 4 activation codes are broadcast against a vector of 16 columns'
// codes (vpdpbusd), summing the block's products in int32 lanes, one lane per column; then the
// block's scales turn the sums into floats once:
//   acc[n] += s_w[n] * s_a * dot[n] - s_w[n] * zp[n] * (s_a * sum of the block's activation codes)
// Built with -mavx512f -mavx512bw -mavx512vnni (CMakeLists.txt), reached only when
// nbits_tiling_supported() says so.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/quantization/nbits_int8_dot.h"
#include "kernels/cpu/quantization/nbits_tiled.h"

namespace mminfer::kernels {

namespace {

constexpr int kGroups = 4;  // 16 columns each

inline __m512i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// The lines of a step's groups that we read, 4 KiB ahead: one thread alone does not reach DRAM's
// read rate on the hardware prefetcher's requests (measured: 20-27 GB/s without, 27-33 with,
// where a plain read gets 25). Addresses as integers: past the weight's end they point nowhere,
// which a prefetch ignores.
template <int G>
inline void prefetch_ahead(const uint8_t* wp) {
  const uintptr_t ahead = reinterpret_cast<uintptr_t>(wp) + 4096;
  for (int i = 0; i < G; ++i) _mm_prefetch(reinterpret_cast<const char*>(ahead + 64 * i), _MM_HINT_T0);
}

// Rows [m0, m0 + R) times G of one tile's groups of 16 columns, from group g0: the whole tile
// (G 4) or one half (G 2, g0 0 or 2), so that threads can share a product by halves.
template <int Bits, int R, int G>
void tile_rows(const NBitsTiled& t, const Int8Rows& q, int64_t m0, int64_t tile, int g0, float* y) {
  const int64_t kb = t.k_blocks(), bs = t.block_size;
  const uint8_t* wp = t.codes + tile * t.tile_code_bytes() + g0 * 64;
  const float* scales = t.scales + tile * kb * 64 + g0 * 16;
  const uint8_t* zps = t.zero_points + tile * kb * 64 + g0 * 16;
  const int8_t* a[R];
  for (int r = 0; r < R; ++r) a[r] = q.codes.data() + (m0 + r) * q.kpad;
  __m512 acc[R][G];
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_ps();
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  for (int64_t b = 0; b < kb; ++b) {
    __m512i dot[R][G];
    for (int r = 0; r < R; ++r)
      for (int g = 0; g < G; ++g) dot[r][g] = _mm512_setzero_si512();
    const int64_t k0 = b * bs;
    if constexpr (Bits == 8) {
      for (int64_t k = k0; k < k0 + bs; k += 4, wp += kGroups * 64) {
        prefetch_ahead<G>(wp);
        __m512i w[G];
        for (int g = 0; g < G; ++g) w[g] = _mm512_loadu_si512(wp + g * 64);
        for (int r = 0; r < R; ++r) {
          const __m512i av = broadcast4(a[r] + k);
          for (int g = 0; g < G; ++g) dot[r][g] = _mm512_dpbusd_epi32(dot[r][g], w[g], av);
        }
      }
    } else {
      for (int64_t k = k0; k < k0 + bs; k += 8, wp += kGroups * 64) {
        prefetch_ahead<G>(wp);
        __m512i lo[G], hi[G];
        for (int g = 0; g < G; ++g) {
          const __m512i v = _mm512_loadu_si512(wp + g * 64);
          lo[g] = _mm512_and_si512(v, low4);
          hi[g] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
        }
        for (int r = 0; r < R; ++r) {
          const __m512i alo = broadcast4(a[r] + k), ahi = broadcast4(a[r] + k + 4);
          for (int g = 0; g < G; ++g)
            dot[r][g] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(dot[r][g], lo[g], alo), hi[g], ahi);
        }
      }
    }
    for (int g = 0; g < G; ++g) {
      const __m512 sw = _mm512_loadu_ps(scales + b * 64 + g * 16);
      const __m128i z = _mm_loadu_si128(reinterpret_cast<const __m128i*>(zps + b * 64 + g * 16));
      const __m512 swz = _mm512_mul_ps(sw, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(z)));
      for (int r = 0; r < R; ++r) {
        const __m512 sa = _mm512_set1_ps(q.block_scale[static_cast<size_t>((m0 + r) * kb + b)]);
        const __m512 sum = _mm512_set1_ps(q.block_sum[static_cast<size_t>((m0 + r) * kb + b)]);
        acc[r][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[r][g]), _mm512_mul_ps(sw, sa), acc[r][g]);
        acc[r][g] = _mm512_fnmadd_ps(swz, sum, acc[r][g]);
      }
    }
  }
  const int64_t n0 = tile * NBitsTiled::kTileColumns + g0 * 16;
  for (int g = 0; g < G; ++g) {
    const int64_t n = n0 + g * 16, valid = std::min<int64_t>(16, t.N - n);
    if (valid <= 0) break;
    const __mmask16 mask = valid >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << valid) - 1);
    for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + (m0 + r) * t.N + n, mask, acc[r][g]);
  }
}

template <int Bits, int G>
void rows_of_tile(const NBitsTiled& t, const Int8Rows& q, int64_t tile, int g0, float* y) {
  int64_t m = 0;
  for (; m + 2 <= q.M; m += 2) tile_rows<Bits, 2, G>(t, q, m, tile, g0, y);
  if (m < q.M) tile_rows<Bits, 1, G>(t, q, m, tile, g0, y);
}

// Half tiles [h0, h1): a half at either end alone, whole tiles between.
template <int Bits>
void halves_of(const NBitsTiled& t, const Int8Rows& q, int64_t h0, int64_t h1, float* y) {
  if (h0 >= h1) return;
  if (h0 % 2) rows_of_tile<Bits, 2>(t, q, h0++ / 2, 2, y);
  for (; h0 + 2 <= h1; h0 += 2) rows_of_tile<Bits, 4>(t, q, h0 / 2, 0, y);
  if (h0 < h1) rows_of_tile<Bits, 2>(t, q, h0 / 2, 0, y);
}

}  // namespace

void nbits_tiled_avx512vnni(const NBitsTiled& t, const Int8Rows& q, int64_t half0, int64_t half1, float* y) {
  if (t.bits == 4)
    halves_of<4>(t, q, half0, half1, y);
  else
    halves_of<8>(t, q, half0, half1, y);
}

}  // namespace mminfer::kernels
