// MatMulNBits without materializing the FP32 weight. Decode (M == 1) is a GEMV bound by how fast
// the packed weight streams from memory: each column's blocks are unpacked in registers and
// multiplied into A at once; the zero point leaves the inner loop through
//   sum_k (q_k - z) * s * a_k = s * (sum_k q_k * a_k) - s * z * sum_k a_k
// with A's per-block sums computed once. Prefill (M > 1) dequantizes panels of columns to FP32
// (each thread its own panel) and multiplies each with the FP32 GEMM.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "core/cpu_features.h"
#include "core/parallel.h"
#include "kernels/cpu/common/vector_math.h"
#include "kernels/cpu/gemm/dense_gemm.h"
#include "kernels/cpu/quantization/matmul_nbits.h"

namespace mminfer::kernels {

namespace {

// Sixteen 4-bit values (8 bytes, low nibble first) as bytes in K order.
__m128i unpack16_u4(const uint8_t* p) {
  const __m128i low4 = _mm_set1_epi8(0x0f);
  __m128i raw = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  __m128i lo = _mm_and_si128(raw, low4);
  __m128i hi = _mm_and_si128(_mm_srli_epi16(raw, 4), low4);
  return _mm_unpacklo_epi8(lo, hi);
}

// One column's dot product with the zero-point correction, blocks of 16 values at a time.
template <int Bits>
float column_dot_avx2(const NBitsWeights& w, int64_t n, const float* a, const float* a_block_sums) {
  const int64_t kb = w.k_blocks(), bs = w.block_size, blob = w.blob_bytes();
  const uint8_t* row = w.packed + n * kb * blob;
  const float* s = w.scales + n * kb;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();  // alternate blocks: two FMA chains
  float correction = 0.f;
  for (int64_t b = 0; b < kb; ++b) {
    const uint8_t* p = row + b * blob;
    const float* ab = a + b * bs;
    __m256 d0 = _mm256_setzero_ps(), d1 = _mm256_setzero_ps();
    for (int64_t j = 0; j < bs; j += 16) {
      __m128i v;
      if constexpr (Bits == 4)
        v = unpack16_u4(p + j / 2);
      else
        v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + j));
      __m256 f0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
      __m256 f1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)));
      d0 = _mm256_fmadd_ps(f0, _mm256_loadu_ps(ab + j), d0);
      d1 = _mm256_fmadd_ps(f1, _mm256_loadu_ps(ab + j + 8), d1);
    }
    if (b & 1)
      acc1 = _mm256_fmadd_ps(_mm256_add_ps(d0, d1), _mm256_set1_ps(s[b]), acc1);
    else
      acc0 = _mm256_fmadd_ps(_mm256_add_ps(d0, d1), _mm256_set1_ps(s[b]), acc0);
    correction += s[b] * w.zero_point(n, b) * a_block_sums[b];
  }
  return vmath::hsum(_mm256_add_ps(acc0, acc1)) - correction;
}

// A row padded with zeros to whole blocks (the padding's weights then add nothing) and its
// per-block sums; kept per thread so that decode steps allocate nothing once warm.
struct PaddedRow {
  const float* data;
  const float* block_sums;
};
PaddedRow pad_row(const NBitsWeights& w, const float* a) {
  thread_local std::vector<float> padded, sums;
  const int64_t kb = w.k_blocks(), bs = w.block_size, kp = kb * bs;
  const float* data = a;
  if (kp != w.K) {
    padded.assign(static_cast<size_t>(kp), 0.f);
    std::copy(a, a + w.K, padded.begin());
    data = padded.data();
  }
  sums.resize(static_cast<size_t>(kb));
  for (int64_t b = 0; b < kb; ++b) {
    float t = 0.f;
    for (int64_t j = 0; j < bs; ++j) t += data[b * bs + j];
    sums[static_cast<size_t>(b)] = t;
  }
  return {data, sums.data()};
}

// Columns [n0, n0 + cols) of W^T, dequantized to FP32 rows of length K (ld = K): whole blocks
// sixteen values a step, a ragged last block value by value.
void dequantize_panel(const NBitsWeights& w, int64_t n0, int64_t cols, float* out) {
  const int64_t kb = w.k_blocks(), bs = w.block_size, blob = w.blob_bytes(), K = w.K;
  for (int64_t c = 0; c < cols; ++c) {
    const int64_t n = n0 + c;
    float* o = out + c * K;
    for (int64_t b = 0; b < kb; ++b) {
      const float s = w.scales[n * kb + b], zs = w.zero_point(n, b) * s;
      const uint8_t* p = w.packed + (n * kb + b) * blob;
      const int64_t len = std::min(bs, K - b * bs);
      float* ob = o + b * bs;
      if (len == bs) {
        const __m256 vs = _mm256_set1_ps(s), vz = _mm256_set1_ps(zs);
        for (int64_t j = 0; j < bs; j += 16) {
          const __m128i v = w.bits == 4 ? unpack16_u4(p + j / 2) : _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + j));
          const __m256 f0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
          const __m256 f1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)));
          _mm256_storeu_ps(ob + j, _mm256_fmsub_ps(f0, vs, vz));
          _mm256_storeu_ps(ob + j + 8, _mm256_fmsub_ps(f1, vs, vz));
        }
      } else {
        for (int64_t j = 0; j < len; ++j) ob[j] = static_cast<float>(NBitsWeights::unpack(p, j, w.bits)) * s - zs;
      }
    }
  }
}

constexpr int64_t kPanelColumns = 64;

}  // namespace

void nbits_gemv_avx2(const NBitsWeights& w, const float* a, const float* a_block_sums, int64_t n0, int64_t n1, float* y) {
  for (int64_t n = n0; n < n1; ++n)
    y[n] = w.bits == 4 ? column_dot_avx2<4>(w, n, a, a_block_sums) : column_dot_avx2<8>(w, n, a, a_block_sums);
}

bool matmul_nbits_fast_supported(const NBitsWeights& w) {
  return (w.bits == 4 || w.bits == 8) && !w.g_idx && w.block_size >= 16 && w.block_size % 16 == 0;
}

void matmul_nbits_fast(const NBitsWeights& w, const float* a, int64_t M, const float* bias, float* y) {
  const int64_t N = w.N, K = w.K;
  if (M == 1) {
    PaddedRow row = pad_row(w, a);
    const bool avx512 = cpu_features().avx512f;
    // Enough bytes per thread that starting one pays: 32 KiB of packed weight at least.
    int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, w.k_blocks() * w.blob_bytes()));
    parallel_for(N, grain, [&](int64_t n0, int64_t n1) {
      if (avx512)
        nbits_gemv_avx512(w, row.data, row.block_sums, n0, n1, y);
      else
        nbits_gemv_avx2(w, row.data, row.block_sums, n0, n1, y);
    });
  } else {
    const int64_t panels = (N + kPanelColumns - 1) / kPanelColumns;
    parallel_for(panels, 1, [&](int64_t p0, int64_t p1) {
      thread_local std::vector<float> panel;
      panel.resize(static_cast<size_t>(kPanelColumns * K));
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t n0 = p * kPanelColumns, cols = std::min(kPanelColumns, N - n0);
        dequantize_panel(w, n0, cols, panel.data());
        sgemm(false, true, M, cols, K, 1.f, a, K, panel.data(), K, 0.f, y + n0, N);
      }
    });
  }
  add_bias_rows(y, bias, M, N);
}

void add_bias_rows(float* y, const float* bias, int64_t M, int64_t N) {
  if (!bias) return;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) y[m * N + n] += bias[n];
}

}  // namespace mminfer::kernels
