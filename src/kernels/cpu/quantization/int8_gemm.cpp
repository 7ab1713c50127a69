#include "kernels/cpu/quantization/int8_gemm.h"

#include <cmath>
#include <string>

#include "core/cpu_features.h"
#include "core/parallel.h"
#include "kernels/cpu/common/kernel.h"
#include "kernels/cpu/gemm/activation_simd.h"
#include "kernels/cpu/quantization/int8_epilogue.h"
#include "kernels/cpu/quantization/quantize_rows.h"

namespace mminfer::kernels {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

int Int8Gemm::weight_limit() {
  // Without VNNI, oneDNN multiplies u8·s8 with vpmaddubsw, whose int16 pair sums saturate
  // above 32767: 255 · 63 · 2 stays below, 255 · 127 · 2 does not.
  return cpu_features().vnni() ? 127 : 63;
}

Int8Gemm::Int8Gemm(const float* w, int64_t K, int64_t N, bool w_transposed, float alpha, const float* bias,
                   Activation act, bool per_tensor, const StaticRange* range)
    : K_(K), N_(N), act_(act), per_tensor_(per_tensor || range) {
  if (range) range_ = *range;
  if (K < 1 || K > kMaxK || N < 1) fail("INT8 GEMM needs 1 <= K <= " + std::to_string(kMaxK) + " and N >= 1");
  // Visits alpha · w[k, n] in the order the source is stored, so loading large weights does not
  // stride through memory.
  auto each = [&](auto&& f) {
    if (w_transposed) {
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) f(k, n, alpha * w[n * K + k]);
    } else {
      for (int64_t k = 0; k < K; ++k)
        for (int64_t n = 0; n < N; ++n) f(k, n, alpha * w[k * N + n]);
    }
  };
  const float limit = static_cast<float>(weight_limit());
  std::vector<float> amax(static_cast<size_t>(N), 0.f);
  std::vector<char> finite(static_cast<size_t>(N), 1);
  // Plain comparisons rather than std::fmax/fmin, which compile to library calls (their NaN rules
  // differ from the instructions'); a column with a NaN is marked by `finite` either way.
  each([&](int64_t, int64_t n, float v) {
    const float a = std::fabs(v);
    finite[n] = finite[n] && std::isfinite(v);
    amax[n] = a > amax[n] ? a : amax[n];
  });
  w_scale_.resize(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n)  // a NaN or inf weight has no int8 form: its column comes out NaN
    w_scale_[n] = finite[n] ? (amax[n] > 0.f ? amax[n] / limit : 1.f) : std::nanf("");
  wq_.resize(static_cast<size_t>(K * N));
  w_sum_.assign(static_cast<size_t>(N), 0);
  each([&](int64_t k, int64_t n, float v) {
    float q = std::isfinite(w_scale_[n]) ? std::nearbyint(v / w_scale_[n]) : 0.f;
    q = q < -limit ? -limit : (q > limit ? limit : q);
    wq_[k * N + n] = static_cast<int8_t>(q);
    w_sum_[n] += static_cast<int32_t>(q);
  });
  bias_.assign(static_cast<size_t>(N), 0.f);
  if (bias) bias_.assign(bias, bias + N);
  plain_weights_ = dnnl::memory({{K, N}, dt::s8, tag::ab}, dnnl_engine(), wq_.data());
}

Int8Gemm::Plan& Int8Gemm::plan_for(int64_t M) {
  auto it = plans_.find(M);
  if (it != plans_.end()) return it->second;
  if (plans_.size() >= 32) plans_.erase(plans_.begin());  // bound memory under shape churn
  try {
    dnnl::memory::desc a_md({M, K_}, dt::u8, tag::ab);
    dnnl::memory::desc w_md({K_, N_}, dt::s8, tag::any);
    dnnl::memory::desc y_md({M, N_}, dt::s32, tag::ab);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, w_md, y_md), dnnl_engine());
    Plan plan;
    plan.prim = dnnl::matmul(pd);
    plan.weights = packed_.get(plain_weights_, pd.weights_desc());
    return plans_.emplace(M, std::move(plan)).first->second;
  } catch (const dnnl::error& e) {
    fail_dnnl("int8 matmul primitive", e);
  }
}

void Int8Gemm::run(const float* a, int64_t M, float* y, const float* residual) {
  if (M <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  size_t mk = static_cast<size_t>(M * K_), m = static_cast<size_t>(M);
  if (qa_.size() < mk) qa_.resize(mk);
  if (a_scale_.size() < m) a_scale_.resize(m), a_zero_.resize(m);
  quantize_u8(a, M, K_, per_tensor_, {qa_.data(), a_scale_.data(), a_zero_.data()}, range_ ? &*range_ : nullptr);
  // The int32 product goes straight into Y's bytes unless Y also holds the residual.
  int32_t* acc = reinterpret_cast<int32_t*>(y);
  if (residual == y) {
    if (acc_.size() < static_cast<size_t>(M * N_)) acc_.resize(static_cast<size_t>(M * N_));
    acc = acc_.data();
  }
  Plan& plan = plan_for(M);
  dnnl::memory a_mem({{M, K_}, dt::u8, tag::ab}, dnnl_engine(), qa_.data());
  dnnl::memory y_mem({{M, N_}, dt::s32, tag::ab}, dnnl_engine(), acc);
  try {
    plan.prim.execute(dnnl_stream(), {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, plan.weights}, {DNNL_ARG_DST, y_mem}});
    dnnl_stream().wait();
  } catch (const dnnl::error& e) {
    fail_dnnl("int8 matmul", e);
  }
  const Int8Columns cols{w_sum_.data(), w_scale_.data(), bias_.data(), act_};
  auto finish = cpu_features().avx512f ? finish_int8_row_avx512 : finish_int8_row_avx2;
  parallel_for(M, std::max<int64_t>(1, 8192 / N_), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      finish(cols, acc + r * N_, N_, a_zero_[r], a_scale_[r], residual ? residual + r * N_ : nullptr, y + r * N_);
  });
}

void Int8Gemm::run_reference(const float* a, int64_t M, float* y, const float* residual) const {
  if (M <= 0) return;
  std::vector<uint8_t> q(static_cast<size_t>(M * K_));
  std::vector<float> scale(static_cast<size_t>(M));
  std::vector<int32_t> zero(static_cast<size_t>(M));
  quantize_u8_reference(a, M, K_, per_tensor_, {q.data(), scale.data(), zero.data()}, range_ ? &*range_ : nullptr);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N_; ++n) {
      int32_t acc = 0;
      for (int64_t k = 0; k < K_; ++k) acc += (q[m * K_ + k] - zero[m]) * wq_[k * N_ + n];
      float v = std::fma(static_cast<float>(acc) * w_scale_[n], scale[m], bias_[n]);
      if (residual) v += residual[m * N_ + n];
      y[m * N_ + n] = act_.apply(v);
    }
}

}  // namespace mminfer::kernels
