// Gemm: Y = alpha * op(A) * op(B) + beta * C, C broadcast to [M, N]. With constant float32 B and
// a row-vector (or absent) C this is a packed matmul with a fused bias.
#include <memory>

#include "core/parallel.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/gemm/dense_gemm.h"
#include "kernels/cpu/math/matmul_common.h"

namespace mminfer::kernels {

namespace {

struct GemmDims {
  int64_t M, K, N;
  int64_t c_rows = 0, c_cols = 0;  // C's broadcast shape; 0 when absent
};

template <typename T, typename Acc>
void gemm_reference(const GemmDims& d, bool ta, bool tb, double alpha, double beta, const T* a, const T* b,
                    const T* c, T* y) {
  parallel_for(d.M, 16, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m)
      for (int64_t n = 0; n < d.N; ++n) {
        Acc acc = 0;
        for (int64_t k = 0; k < d.K; ++k)
          acc += static_cast<Acc>(a[ta ? k * d.M + m : m * d.K + k]) * static_cast<Acc>(b[tb ? n * d.K + k : k * d.N + n]);
        double v = alpha * static_cast<double>(acc);
        if (c) v += beta * static_cast<double>(c[(d.c_rows == 1 ? 0 : m) * d.c_cols + (d.c_cols == 1 ? 0 : n)]);
        y[m * d.N + n] = static_cast<T>(v);
      }
  });
}

class GemmKernel : public Kernel {
 public:
  bool runs_onednn() const override { return packed_ ? packed_->uses_onednn() : true; }
  explicit GemmKernel(const KernelSpec& spec) {
    alpha_ = spec.a().get_float("alpha", 1.f);
    beta_ = spec.a().get_float("beta", 1.f);
    trans_a_ = spec.a().get_int("transA", 0) != 0;
    trans_b_ = spec.a().get_int("transB", 0) != 0;
    const Tensor* w = spec.constant_inputs.size() > 1 ? spec.constant_inputs[1] : nullptr;
    const Tensor* c = spec.constant_inputs.size() > 2 ? spec.constant_inputs[2] : nullptr;
    if (!w || w->dtype() != DType::kFloat32 || w->rank() != 2 || trans_a_ || spec.input_dtypes[0] != DType::kFloat32) return;
    int64_t K = trans_b_ ? w->dim(1) : w->dim(0), N = trans_b_ ? w->dim(0) : w->dim(1);
    std::vector<float> bias;
    if (spec.has_input(2)) {
      // Only a constant C that is one row (or one value) folds into a bias.
      if (!c || c->dtype() != DType::kFloat32 || c->rank() > 2 || (c->rank() == 2 && c->dim(0) != 1)) return;
      if (c->numel() != N && c->numel() != 1) return;
      bias.resize(static_cast<size_t>(N));
      for (int64_t n = 0; n < N; ++n) bias[n] = beta_ * c->data<float>()[c->numel() == 1 ? 0 : n];
    }
    if (K == 0 || N == 0) return;
    packed_ = make_packed_gemm(spec, w->data<float>(), K, N, trans_b_, alpha_, bias.empty() ? nullptr : bias.data(),
                               Activation{});
  }

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& a = need_input(in, 0, "A");
    const Tensor& b = need_input(in, 1, "B");
    if (a.dtype() != b.dtype()) fail(std::string("A and B dtypes differ: ") + dtype_name(a.dtype()) + " vs " + dtype_name(b.dtype()));
    GemmDims d = dims(in);
    out[0] = {a.dtype(), {d.M, d.N}};
  }

  void run(const Inputs& in, Outputs& out) override {
    const Tensor& a = *in[0];
    const Tensor& b = *in[1];
    const Tensor* c = in.size() > 2 ? in[2] : nullptr;
    Tensor& y = *out[0];
    GemmDims d = dims(in);
    if (d.M * d.N == 0) return;
    switch (a.dtype()) {
      case DType::kFloat32: run_f32(d, a.data<float>(), b.data<float>(), c ? c->data<float>() : nullptr, y.data<float>()); return;
      case DType::kFloat16:
      case DType::kBFloat16: {
        std::vector<float> af = to_f32(a), bf = to_f32(b), cf = c ? to_f32(*c) : std::vector<float>();
        std::vector<float> yf(static_cast<size_t>(y.numel()));
        run_f32(d, af.data(), bf.data(), c ? cf.data() : nullptr, yf.data(), false);
        from_f32(yf.data(), y);
        return;
      }
      case DType::kFloat64: return ref<double, double>(d, a, b, c, y);
      case DType::kInt32: return ref<int32_t, int64_t>(d, a, b, c, y);
      case DType::kInt64: return ref<int64_t, int64_t>(d, a, b, c, y);
      case DType::kUint32: return ref<uint32_t, uint64_t>(d, a, b, c, y);
      case DType::kUint64: return ref<uint64_t, uint64_t>(d, a, b, c, y);
      default: fail(std::string("unsupported dtype ") + dtype_name(a.dtype()));
    }
  }

 private:
  GemmDims dims(const Inputs& in) const {
    const Tensor& a = *in[0];
    const Tensor& b = *in[1];
    if (a.rank() != 2 || b.rank() != 2)
      fail("A and B must be 2-D, got " + shape_str(a.shape()) + " and " + shape_str(b.shape()));
    GemmDims d;
    d.M = trans_a_ ? a.dim(1) : a.dim(0);
    d.K = trans_a_ ? a.dim(0) : a.dim(1);
    int64_t kb = trans_b_ ? b.dim(1) : b.dim(0);
    d.N = trans_b_ ? b.dim(0) : b.dim(1);
    if (kb != d.K) fail("inner dimensions differ: A is " + shape_str(a.shape()) + " and B is " + shape_str(b.shape()));
    if (in.size() > 2 && in[2]) {
      const Tensor& c = *in[2];
      if (c.dtype() != a.dtype()) fail("C dtype differs from A");
      if (c.rank() > 2) fail("C must have rank <= 2, got " + shape_str(c.shape()));
      d.c_rows = c.rank() == 2 ? c.dim(0) : 1;
      d.c_cols = c.rank() >= 1 ? c.dim(c.rank() - 1) : 1;
      if ((d.c_rows != 1 && d.c_rows != d.M) || (d.c_cols != 1 && d.c_cols != d.N))
        fail("C of shape " + shape_str(c.shape()) + " does not broadcast to " + std::to_string(d.M) + "x" + std::to_string(d.N));
    }
    return d;
  }

  void run_f32(const GemmDims& d, const float* a, const float* b, const float* c, float* y, bool may_pack = true) {
    if (packed_ && may_pack) {
      packed_->run(a, d.M, y);
      return;
    }
    float beta = 0.f;
    if (c && beta_ != 0.f) {
      for (int64_t m = 0; m < d.M; ++m)
        for (int64_t n = 0; n < d.N; ++n)
          y[m * d.N + n] = beta_ * c[(d.c_rows == 1 ? 0 : m) * d.c_cols + (d.c_cols == 1 ? 0 : n)];
      beta = 1.f;
    }
    sgemm(trans_a_, trans_b_, d.M, d.N, d.K, alpha_, a, trans_a_ ? d.M : d.K, b, trans_b_ ? d.K : d.N, beta, y, d.N);
  }

  template <typename T, typename Acc>
  void ref(const GemmDims& d, const Tensor& a, const Tensor& b, const Tensor* c, Tensor& y) {
    gemm_reference<T, Acc>(d, trans_a_, trans_b_, alpha_, beta_, a.data<T>(), b.data<T>(), c ? c->data<T>() : nullptr,
                           y.data<T>());
  }

  float alpha_, beta_;
  bool trans_a_, trans_b_;
  std::unique_ptr<PackedGemm> packed_;
};

}  // namespace

void register_gemm(Registry& r) {
  r.add({"Gemm", "", 1, 1000, 0,
         {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt32, DType::kInt64, DType::kUint32,
          DType::kUint64},
         [](const KernelSpec& s) { return std::make_unique<GemmKernel>(s); }},
        kHeavy);
}

}  // namespace mminfer::kernels
