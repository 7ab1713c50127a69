#include "kernels/cpu/gemm/bf16_gemm.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "core/cpu_features.h"
#include "core/parallel.h"
#include "kernels/cpu/common/kernel.h"

namespace mminfer::kernels {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

bool Bf16Gemm::native() {
  return cpu_features().avx512_bf16;
}

bool Bf16Gemm::supported() {
  const CpuFeatures& f = cpu_features();
  return f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
}

uint16_t Bf16Gemm::round(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if (std::isnan(x)) return static_cast<uint16_t>((bits >> 16) | 0x40);  // keep it a (quiet) NaN
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

namespace {

// round() over n values, 8 at a time: add 0x7FFF plus the kept LSB, keep the high half; NaNs
// take the scalar path's quiet-NaN form instead.
void round_all(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  const __m256i bias = _mm256_set1_epi32(0x7FFF), one = _mm256_set1_epi32(1), quiet = _mm256_set1_epi32(0x40);
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_loadu_ps(src + i);
    __m256i bits = _mm256_castps_si256(x);
    __m256i high = _mm256_srli_epi32(bits, 16);
    __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(bias, _mm256_and_si256(high, one))), 16);
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    __m256i r = _mm256_blendv_epi8(rounded, _mm256_or_si256(high, quiet), nan);
    // 8 x 32-bit lanes (values < 2^16) -> 8 x 16-bit.
    __m128i lo = _mm256_castsi256_si128(r), hi = _mm256_extracti128_si256(r, 1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm_packus_epi32(lo, hi));
  }
  for (; i < n; ++i) dst[i] = Bf16Gemm::round(src[i]);
}

}  // namespace

Bf16Gemm::Bf16Gemm(const float* w, int64_t K, int64_t N, bool w_transposed, float alpha, const float* bias,
                   Activation act)
    : K_(K), N_(N), act_(act) {
  w_bf16_.resize(static_cast<size_t>(K * N));
  // Stored as the source is (K x N, or N x K when transposed): no strided pass at load.
  if (alpha == 1.f) {
    round_all(w, w_bf16_.data(), K * N);
  } else {
    for (int64_t i = 0; i < K * N; ++i) w_bf16_[i] = round(alpha * w[i]);
  }
  dnnl::memory::dims strides = w_transposed ? dnnl::memory::dims{1, K} : dnnl::memory::dims{N, 1};
  plain_weights_ = dnnl::memory(dnnl::memory::desc({K, N}, dt::bf16, strides), dnnl_engine(), w_bf16_.data());
  if (bias) {
    bias_.assign(bias, bias + N);
    bias_mem_ = dnnl::memory({{1, N}, dt::f32, tag::ab}, dnnl_engine(), bias_.data());
  }
  dnnl::post_ops probe;
  fused_act_ = append_activation(probe, act_);
}

Bf16Gemm::Plan& Bf16Gemm::plan_for(int64_t M, bool sum) {
  auto it = plans_.find({M, sum});
  if (it != plans_.end()) return it->second;
  if (plans_.size() >= 32) plans_.erase(plans_.begin());  // bound memory under shape churn
  try {
    auto pd = epilogue_matmul(M, K_, N_, dt::bf16, bias_.empty() ? nullptr : &bias_mem_, sum, fused_act_, act_);
    Plan plan;
    plan.prim = dnnl::matmul(pd);
    plan.weights = packed_.get(plain_weights_, pd.weights_desc());
    // Later layouts are packed from the first packing: the plain copy can go.
    plain_weights_ = dnnl::memory();
    std::vector<uint16_t>().swap(w_bf16_);
    return plans_.emplace(std::make_pair(M, sum), std::move(plan)).first->second;
  } catch (const dnnl::error& e) {
    fail_dnnl("bf16 matmul primitive", e);
  }
}

void Bf16Gemm::run(const float* a, int64_t M, float* y, const float* residual) {
  if (M <= 0 || N_ <= 0) return;
  if (residual && residual != y) std::memcpy(y, residual, static_cast<size_t>(M * N_) * sizeof(float));
  std::lock_guard<std::mutex> lock(mu_);
  Plan& plan = plan_for(M, residual != nullptr);
  size_t mk = static_cast<size_t>(M * K_);
  if (a_bf16_.size() < mk) a_bf16_.resize(mk);
  uint16_t* ab = a_bf16_.data();
  parallel_for(static_cast<int64_t>(mk), 32768, [&](int64_t i0, int64_t i1) { round_all(a + i0, ab + i0, i1 - i0); });
  dnnl::memory a_mem({{M, K_}, dt::bf16, tag::ab}, dnnl_engine(), ab);
  run_epilogue_matmul(plan.prim, a_mem, plan.weights, bias_.empty() ? nullptr : &bias_mem_, y, M, N_, "bf16 matmul");
  if (!fused_act_) apply_epilogue(y, M, N_, nullptr, act_);
}

}  // namespace mminfer::kernels
