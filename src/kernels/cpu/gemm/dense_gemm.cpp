#include "kernels/cpu/gemm/dense_gemm.h"

#include <cstring>
#include <string>

#include "core/parallel.h"
#include "kernels/cpu/common/kernel.h"
#include "kernels/cpu/gemm/dnnl_isa.h"

namespace mminfer::kernels {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // oneDNN rejects K = 0; the product is empty
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.f ? 0.f : beta * C[i * ldc + j];
    return;
  }
  cap_dnnl_isa();  // sgemm needs no engine, so it is a first use of oneDNN of its own
  dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if (st != dnnl_success) fail("oneDNN sgemm failed with status " + std::to_string(static_cast<int>(st)));
}

ConstWeightGemm::ConstWeightGemm(const float* w, int64_t K, int64_t N, bool w_transposed, float alpha,
                                 const float* bias, Activation act)
    : K_(K), N_(N), act_(act) {
  std::vector<float> scaled;  // alpha != 1: packed from a scaled copy; otherwise straight from `w`
  if (alpha != 1.f) {
    scaled.assign(w, w + K * N);
    for (float& v : scaled) v *= alpha;
    w = scaled.data();
  }
  // Logical K x N; a transposed source is the same matrix with swapped strides.
  dnnl::memory::dims strides = w_transposed ? dnnl::memory::dims{1, K} : dnnl::memory::dims{N, 1};
  dnnl::memory::desc md({K, N}, dt::f32, strides);
  dnnl::memory plain(md, dnnl_engine(), const_cast<float*>(w));
  if (bias) {
    bias_.assign(bias, bias + N);
    bias_mem_ = dnnl::memory({{1, N}, dt::f32, tag::ab}, dnnl_engine(), bias_.data());
  }
  dnnl::post_ops probe;
  fused_act_ = append_activation(probe, act_);
  // Pack now, in the layout oneDNN picks for a typical row count, so that neither `w` nor a
  // copy of it is needed later: other row counts repack from this packing if they differ.
  if (K_ > 0 && N_ > 0) {
    try {
      dnnl::memory packed = packed_.get(plain, const_weight_desc(K_, N_));
      if (panel_gemm_in_use()) panels_ = panels_of(packed);
    } catch (const dnnl::error& e) {
      fail_dnnl("matmul primitive", e);
    }
  }
}

dnnl::memory::desc const_weight_desc(int64_t K, int64_t N) {
  constexpr int64_t kTypicalRows = 64;
  return epilogue_matmul(kTypicalRows, K, N, dt::f32, nullptr, false, false, {}).weights_desc();
}

dnnl::matmul::primitive_desc epilogue_matmul(int64_t M, int64_t K, int64_t N, dt type, const dnnl::memory* bias,
                                             bool sum, bool fuse_act, const Activation& act) {
  dnnl::memory::desc a_md({M, K}, type, tag::ab);
  dnnl::memory::desc w_md({K, N}, type, tag::any);
  dnnl::memory::desc y_md({M, N}, dt::f32, tag::ab);
  dnnl::primitive_attr attr;
  dnnl::post_ops ops;
  if (sum) ops.append_sum(1.f);
  if (fuse_act) append_activation(ops, act);
  attr.set_post_ops(ops);
  auto desc = bias ? dnnl::matmul::desc(a_md, w_md, bias->get_desc(), y_md) : dnnl::matmul::desc(a_md, w_md, y_md);
  return dnnl::matmul::primitive_desc(desc, attr, dnnl_engine());
}

void run_epilogue_matmul(const dnnl::matmul& prim, const dnnl::memory& src, const dnnl::memory& weights,
                         const dnnl::memory* bias, float* y, int64_t M, int64_t N, const char* what) {
  dnnl::memory y_mem({{M, N}, dt::f32, tag::ab}, dnnl_engine(), y);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, y_mem}};
  if (bias) args[DNNL_ARG_BIAS] = *bias;
  try {
    prim.execute(dnnl_stream(), args);
    dnnl_stream().wait();
  } catch (const dnnl::error& e) {
    fail_dnnl(what, e);
  }
}

void onednn_matmul_f32(const float* w, const float* bias, const float* a, int64_t M, int64_t K, int64_t N, float* y,
                       bool residual, const Activation& act) {
  dnnl::memory plain({{K, N}, dt::f32, tag::ab}, dnnl_engine(), const_cast<float*>(w));
  dnnl::memory bias_mem({{1, N}, dt::f32, tag::ab}, dnnl_engine(), const_cast<float*>(bias));
  const dnnl::memory* b = bias ? &bias_mem : nullptr;
  auto pd = epilogue_matmul(M, K, N, dt::f32, b, residual, !act.identity(), act);
  PackedWeights packed = pack_weights(plain, pd.weights_desc());
  dnnl::memory a_mem({{M, K}, dt::f32, tag::ab}, dnnl_engine(), const_cast<float*>(a));
  run_epilogue_matmul(dnnl::matmul(pd), a_mem, packed.mem, b, y, M, N, "matmul");
}

ConstWeightGemm::Plan& ConstWeightGemm::plan_for(int64_t M, bool sum) {
  auto it = plans_.find({M, sum});
  if (it != plans_.end()) return it->second;
  if (plans_.size() >= 32) plans_.erase(plans_.begin());  // bound memory under shape churn
  try {
    auto pd = epilogue_matmul(M, K_, N_, dt::f32, bias_.empty() ? nullptr : &bias_mem_, sum, fused_act_, act_);
    Plan plan;
    plan.prim = dnnl::matmul(pd);
    plan.weights = packed_.get(dnnl::memory(), pd.weights_desc());  // from the first packing
    return plans_.emplace(std::make_pair(M, sum), std::move(plan)).first->second;
  } catch (const dnnl::error& e) {
    fail_dnnl("matmul primitive", e);
  }
}

std::vector<dnnl::eltwise_forward>& ConstWeightGemm::activation_for(int64_t M) {
  auto it = activations_.find(M);
  if (it != activations_.end()) return it->second;
  if (activations_.size() >= 32) activations_.erase(activations_.begin());
  try {
    return activations_.emplace(M, eltwise_chain(act_, {{M, N_}, dt::f32, tag::ab})).first->second;
  } catch (const dnnl::error& e) {
    fail_dnnl("eltwise primitive", e);
  }
}

void ConstWeightGemm::run(const float* a, int64_t M, float* y, const float* residual) {
  if (M <= 0 || N_ <= 0) return;
  if (K_ == 0) {
    for (int64_t i = 0; i < M * N_; ++i) y[i] = residual ? residual[i] : 0.f;
    apply_epilogue(y, M, N_, bias_.empty() ? nullptr : bias_.data(), act_);
    return;
  }
  if (residual && residual != y) std::memcpy(y, residual, static_cast<size_t>(M * N_) * sizeof(float));
  std::lock_guard<std::mutex> lock(mu_);
  if (panels_.base && M <= kPanelGemmMaxRows) {
    panel_gemm(panels_, K_, N_, a, M, y, residual != nullptr, bias_.empty() ? nullptr : bias_.data());
    if (!fused_act_) apply_epilogue(y, M, N_, nullptr, act_);
    else if (!act_.identity()) run_eltwise_chain(activation_for(M), y, {{M, N_}, dt::f32, tag::ab});
    return;
  }
  Plan& plan = plan_for(M, residual != nullptr);
  dnnl::memory a_mem({{M, K_}, dt::f32, tag::ab}, dnnl_engine(), const_cast<float*>(a));
  run_epilogue_matmul(plan.prim, a_mem, plan.weights, bias_.empty() ? nullptr : &bias_mem_, y, M, N_, "matmul");
  if (!fused_act_) apply_epilogue(y, M, N_, nullptr, act_);
}

void apply_epilogue(float* y, int64_t rows, int64_t cols, const float* bias, const Activation& act,
                    const float* residual) {
  if (!bias && !residual && act.identity()) return;
  parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* row = y + r * cols;
      if (bias)
        for (int64_t c = 0; c < cols; ++c) row[c] += bias[c];
      if (residual)
        for (int64_t c = 0; c < cols; ++c) row[c] += residual[r * cols + c];
      if (!act.identity())
        for (int64_t c = 0; c < cols; ++c) row[c] = act.apply(row[c]);
    }
  });
}

}  // namespace mminfer::kernels
