#include "kernels/cpu/gemm/fp16_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "core/parallel.h"
#include "core/weight_memory.h"
#include "kernels/cpu/common/kernel.h"
#include "kernels/cpu/gemm/activation_simd.h"

namespace mminfer::kernels {

namespace {

constexpr float kHalfMax = 65504.f;
constexpr int64_t kBlockK = 256;  // a panel's K block, widened (32 KiB at 32 columns), stays in L1

template <int R>
void tile_avx2(const float* a, int64_t lda, const float* w, int64_t kc, float* c, int64_t ldc, bool accumulate) {
  __m256 c0[R], c1[R];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    c0[r] = accumulate ? _mm256_loadu_ps(c + r * ldc) : _mm256_setzero_ps();
    c1[r] = accumulate ? _mm256_loadu_ps(c + r * ldc + 8) : _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 w0 = _mm256_load_ps(w + k * 16), w1 = _mm256_load_ps(w + k * 16 + 8);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r * lda + k);
      c0[r] = _mm256_fmadd_ps(av, w0, c0[r]);
      c1[r] = _mm256_fmadd_ps(av, w1, c1[r]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(c + r * ldc, c0[r]);
    _mm256_storeu_ps(c + r * ldc + 8, c1[r]);
  }
}

}  // namespace

void widen_halves_avx2(const uint16_t* h, int64_t n, float* f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_store_ps(f + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  for (; i < n; ++i) f[i] = _cvtsh_ss(h[i]);
}

void fp16_tile_avx2(const float* a, int64_t lda, const float* w, int64_t kc, float* c, int64_t ldc, int rows,
                    bool accumulate) {
  switch (rows) {
    case 6: return tile_avx2<6>(a, lda, w, kc, c, ldc, accumulate);
    case 5: return tile_avx2<5>(a, lda, w, kc, c, ldc, accumulate);
    case 4: return tile_avx2<4>(a, lda, w, kc, c, ldc, accumulate);
    case 3: return tile_avx2<3>(a, lda, w, kc, c, ldc, accumulate);
    case 2: return tile_avx2<2>(a, lda, w, kc, c, ldc, accumulate);
    default: return tile_avx2<1>(a, lda, w, kc, c, ldc, accumulate);
  }
}

bool Fp16Gemm::representable(const float* w, int64_t count, float alpha) {
  for (int64_t i = 0; i < count; ++i) {
    float v = alpha * w[i];
    if (!(std::fabs(v) <= kHalfMax)) return false;  // also false for NaN
  }
  return true;
}

Fp16Gemm::Fp16Gemm(const float* w, int64_t K, int64_t N, bool w_transposed, float alpha, const float* bias,
                   Activation act, bool wide)
    : K_(K), N_(N), panel_(wide ? 32 : 16), act_(act) {
  if (K < 1 || N < 1) fail("FP16 GEMM needs K >= 1 and N >= 1");
  if (!representable(w, K * N, alpha)) fail("weights beyond the float16 range (|w| > 65504 or not finite)");
  panels_ = (N + panel_ - 1) / panel_;
  const size_t count = static_cast<size_t>(panels_ * K * panel_);
  packed_ = allocate_weight_memory(count * sizeof(uint16_t));
  uint16_t* p = static_cast<uint16_t*>(packed_.get());
  std::memset(p, 0, count * sizeof(uint16_t));  // the last panel's columns beyond N multiply as zeros
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) {
      float v = alpha * (w_transposed ? w[n * K + k] : w[k * N + n]);
      p[((n / panel_) * K + k) * panel_ + n % panel_] = float_to_half(v);
    }
  if (bias) bias_.assign(bias, bias + N);
}

float Fp16Gemm::weight(int64_t k, int64_t n) const {
  const uint16_t* p = static_cast<const uint16_t*>(packed_.get());
  return half_to_float(p[((n / panel_) * K_ + k) * panel_ + n % panel_]);
}

void Fp16Gemm::run(const float* a, int64_t M, float* y, const float* residual) {
  if (M <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (residual == y) {  // the product overwrites Y: keep the residual it held
    residual_copy_.assign(residual, residual + M * N_);
    residual = residual_copy_.data();
  }
  const bool wide = panel_ == 32;
  const int rows_per_tile = wide ? 12 : 6;
  const uint16_t* packed = static_cast<const uint16_t*>(packed_.get());
  const int64_t threads = std::max(1, num_threads());
  // Each thread owns whole panels (columns of Y), so no two write the same bytes.
  parallel_for(panels_, std::max<int64_t>(1, (panels_ + threads - 1) / threads), [&](int64_t p0, int64_t p1) {
    alignas(64) float edge[12 * 32];  // the last panel's tile when N is not a multiple of the panel
    alignas(64) float w[kBlockK * 32];  // the widened K block of one panel
    for (int64_t k0 = 0; k0 < K_; k0 += kBlockK) {
      const int64_t kc = std::min(kBlockK, K_ - k0);
      for (int64_t p = p0; p < p1; ++p) {
        const uint16_t* halves = packed + (p * K_ + k0) * panel_;
        if (wide) widen_halves_avx512(halves, kc * panel_, w);
        else widen_halves_avx2(halves, kc * panel_, w);
        const int64_t n0 = p * panel_, width = std::min(panel_, N_ - n0);
        for (int64_t m0 = 0; m0 < M; m0 += rows_per_tile) {
          const int rows = static_cast<int>(std::min<int64_t>(rows_per_tile, M - m0));
          float* c = y + m0 * N_ + n0;
          int64_t ldc = N_;
          if (width < panel_) {  // through a full-width scratch tile
            for (int r = 0; r < rows && k0 > 0; ++r) std::memcpy(edge + r * panel_, c + r * N_, width * sizeof(float));
            c = edge, ldc = panel_;
          }
          if (wide) fp16_tile_avx512(a + m0 * K_ + k0, K_, w, kc, c, ldc, rows, k0 > 0);
          else fp16_tile_avx2(a + m0 * K_ + k0, K_, w, kc, c, ldc, rows, k0 > 0);
          if (width < panel_)
            for (int r = 0; r < rows; ++r) std::memcpy(y + (m0 + r) * N_ + n0, edge + r * panel_, width * sizeof(float));
        }
      }
    }
    // This thread's columns are final: bias, residual and activation, row by row.
    const int64_t n0 = p0 * panel_, n1 = std::min(N_, p1 * panel_), width = n1 - n0;
    if (width <= 0) return;
    for (int64_t m = 0; m < M; ++m) {
      float* row = y + m * N_ + n0;
      if (!bias_.empty())
        for (int64_t n = 0; n < width; ++n) row[n] += bias_[n0 + n];
      if (residual)
        for (int64_t n = 0; n < width; ++n) row[n] += residual[m * N_ + n0 + n];
      if (!act_.identity()) {
        if (wide) apply_activation_avx512(act_, row, width);
        else apply_activation_avx2(act_, row, width);
      }
    }
  });
}

void Fp16Gemm::run_reference(const float* a, int64_t M, float* y, const float* residual) const {
  std::vector<float> out(static_cast<size_t>(M * N_));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N_; ++n) {
      float acc = 0.f;
      for (int64_t k = 0; k < K_; ++k) acc += a[m * K_ + k] * weight(k, n);
      float v = acc + (bias_.empty() ? 0.f : bias_[n]) + (residual ? residual[m * N_ + n] : 0.f);
      out[m * N_ + n] = act_.apply(v);
    }
  std::copy(out.begin(), out.end(), y);
}

}  // namespace mminfer::kernels
