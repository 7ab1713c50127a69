// MatMul (numpy semantics) and mminfer::FusedMatMul (MatMul + bias + residual + activation:
// inputs A, B, optional bias, optional Z of the output's shape). float32 runs
// on oneDNN: constant 2-D weights are packed once (ConstWeightGemm), everything else goes through
// sgemm, batched over broadcast batch dims. Other dtypes use a plain loop (float16 via float32).
// A node marked `precision = "int8"` (passes/assign_precision.cpp) runs its constant
// weights in dynamic INT8 instead (Int8Gemm; `int8_activations = "per_tensor"` quantizes A as
// one tensor rather than row by row).
#include <memory>

#include "core/parallel.h"
#include "kernels/cpu/common/broadcast.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/gemm/dense_gemm.h"
#include "kernels/cpu/math/matmul_common.h"

namespace mminfer::kernels {

// Y = A * B for float32 with the batch layout in `s`; `packed` (may be null) holds B, and then
// Y = A * B + bias + residual with its activation.
void matmul_f32(const MatMulShape& s, const float* a, const float* b, float* y, PackedGemm* packed,
                const float* residual) {
  int64_t M = s.M, K = s.K, N = s.N;
  if (s.batch * M * N == 0) return;
  if (s.b_is_matrix) {  // A's batches fold into rows: one big GEMM
    if (packed)
      packed->run(a, s.batch * M, y, residual);
    else
      sgemm(false, false, s.batch * M, N, K, 1.f, a, K, b, N, 0.f, y, N);
    return;
  }
  // Many small products (attention heads): one single-threaded GEMM per batch, batches spread
  // over the threads. Few large ones: each GEMM uses all threads.
  double flops = 2.0 * static_cast<double>(M) * N * K;
  auto one = [&](int64_t n) {
    sgemm(false, false, M, N, K, 1.f, a + s.a_offset[n], K, b + s.b_offset[n], N, 0.f, y + n * M * N, N);
  };
  if (s.batch >= num_threads() && flops < 64e6) {
    parallel_for(s.batch, 1, [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n) one(n);
    });
  } else {
    for (int64_t n = 0; n < s.batch; ++n) one(n);
  }
}

namespace {

template <typename T, typename Acc>
void matmul_reference(const MatMulShape& s, const T* a, const T* b, T* y) {
  int64_t M = s.M, K = s.K, N = s.N;
  parallel_for(s.batch * M, std::max<int64_t>(1, 4096 / std::max<int64_t>(K * N, 1)), [&](int64_t r0, int64_t r1) {
    std::vector<Acc> acc(static_cast<size_t>(N));
    for (int64_t r = r0; r < r1; ++r) {
      int64_t n = r / M, m = r % M;
      const T* ar = a + (s.b_is_matrix ? n * M * K : s.a_offset[n]) + m * K;
      const T* bm = b + (s.b_is_matrix ? 0 : s.b_offset[n]);
      std::fill(acc.begin(), acc.end(), Acc(0));
      for (int64_t k = 0; k < K; ++k) {
        Acc av = static_cast<Acc>(ar[k]);
        const T* br = bm + k * N;
        for (int64_t j = 0; j < N; ++j) acc[j] += av * static_cast<Acc>(br[j]);
      }
      for (int64_t j = 0; j < N; ++j) y[r * N + j] = static_cast<T>(acc[j]);
    }
  });
}

class MatMulKernel : public Kernel {
 public:
  MatMulKernel(const KernelSpec& spec, bool fused) : fused_(fused) {
    if (fused) act_ = Activation::from_attrs(spec.a());
    // Constant float32 weights of rank <= 2 are packed now, with bias and activation fused.
    const Tensor* w = spec.constant_inputs.size() > 1 ? spec.constant_inputs[1] : nullptr;
    const Tensor* bias = fused && spec.constant_inputs.size() > 2 ? spec.constant_inputs[2] : nullptr;
    bool bias_ok = !spec.has_input(2) || (bias && bias->dtype() == DType::kFloat32);
    if (w && w->dtype() == DType::kFloat32 && w->rank() >= 1 && w->rank() <= 2 && w->numel() > 0 && bias_ok &&
        (!fused || spec.input_dtypes[0] == DType::kFloat32)) {
      int64_t K = w->dim(0), N = w->rank() == 2 ? w->dim(1) : 1;
      const float* bias_data = nullptr;
      if (bias) {
        if (bias->numel() != N) fail("bias must have " + std::to_string(N) + " values, got " + shape_str(bias->shape()));
        bias_data = bias->data<float>();
      }
      packed_ = make_packed_gemm(spec, w->data<float>(), K, N, false, 1.f, bias_data, act_);
    }
  }

  // Float products run on oneDNN (sgemm, or the packed weight's primitive) unless the weight is
  // packed for our FP16 kernel.
  bool runs_onednn() const override { return packed_ ? packed_->uses_onednn() : true; }

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& a = need_input(in, 0, "A");
    const Tensor& b = need_input(in, 1, "B");
    if (a.dtype() != b.dtype()) fail(std::string("A and B dtypes differ: ") + dtype_name(a.dtype()) + " vs " + dtype_name(b.dtype()));
    MatMulShape s = matmul_shape(a.shape(), b.shape(), false);
    if (fused_ && in.size() > 2 && in[2]) {
      if (in[2]->numel() != s.N) fail("bias must have " + std::to_string(s.N) + " values, got " + shape_str(in[2]->shape()));
      if (in[2]->dtype() != a.dtype()) fail("bias dtype differs from A");
    }
    Shape y = s.out;
    if (fused_ && in.size() > 3 && in[3]) {
      if (in[3]->dtype() != a.dtype()) fail("Z dtype differs from A");
      y = broadcast_shapes({s.out, in[3]->shape()});
    }
    out[0] = {a.dtype(), y};
  }

  void run(const Inputs& in, Outputs& out) override {
    const Tensor& a = *in[0];
    const Tensor& b = *in[1];
    const Tensor* bias = fused_ && in.size() > 2 ? in[2] : nullptr;
    const Tensor* z = fused_ && in.size() > 3 ? in[3] : nullptr;
    Tensor& y = *out[0];
    MatMulShape s = matmul_shape(a.shape(), b.shape(), true);
    if (y.numel() == 0) return;
    DType t = a.dtype();
    if (z && z->shape() != s.out) {  // Z broadcasts against the product: add it afterwards
      run_broadcast_residual(s, a, b, bias, *z, y);
      return;
    }
    if (t == DType::kFloat32) {
      // Packed weights carry the bias, residual and activation; Z may share Y's buffer.
      bool in_gemm = packed_ && s.b_is_matrix;
      const float* zf = z ? z->data<float>() : nullptr;
      if (zf == y.data<float>() && !in_gemm) {  // the product would overwrite Z before it is added
        std::vector<float> zcopy(zf, zf + y.numel());
        matmul_f32(s, a.data<float>(), b.data<float>(), y.data<float>(), nullptr, nullptr);
        apply_epilogue(y.data<float>(), s.batch * s.M, s.N, bias ? bias->data<float>() : nullptr, act_, zcopy.data());
        return;
      }
      matmul_f32(s, a.data<float>(), b.data<float>(), y.data<float>(), packed_.get(), zf);
      if (fused_ && !in_gemm)
        apply_epilogue(y.data<float>(), s.batch * s.M, s.N, bias ? bias->data<float>() : nullptr, act_, zf);
      return;
    }
    if (t == DType::kFloat16 || t == DType::kBFloat16) {
      std::vector<float> af = to_f32(a), bf = to_f32(b), yf(static_cast<size_t>(y.numel()));
      matmul_f32(s, af.data(), bf.data(), yf.data(), nullptr, nullptr);
      if (fused_) {
        std::vector<float> biasf = bias ? to_f32(*bias) : std::vector<float>();
        std::vector<float> zf = z ? to_f32(*z) : std::vector<float>();
        apply_epilogue(yf.data(), s.batch * s.M, s.N, bias ? biasf.data() : nullptr, act_, z ? zf.data() : nullptr);
      }
      from_f32(yf.data(), y);
      return;
    }
    if (fused_) fail(std::string("FusedMatMul supports float types only, got ") + dtype_name(t));
    switch (t) {
      case DType::kFloat64: matmul_reference<double, double>(s, a.data<double>(), b.data<double>(), y.data<double>()); break;
      case DType::kInt32: matmul_reference<int32_t, int64_t>(s, a.data<int32_t>(), b.data<int32_t>(), y.data<int32_t>()); break;
      case DType::kInt64: matmul_reference<int64_t, int64_t>(s, a.data<int64_t>(), b.data<int64_t>(), y.data<int64_t>()); break;
      case DType::kUint32: matmul_reference<uint32_t, uint64_t>(s, a.data<uint32_t>(), b.data<uint32_t>(), y.data<uint32_t>()); break;
      case DType::kUint64: matmul_reference<uint64_t, uint64_t>(s, a.data<uint64_t>(), b.data<uint64_t>(), y.data<uint64_t>()); break;
      default: fail(std::string("unsupported dtype ") + dtype_name(t));
    }
  }

 private:
  // Y = act(A·B + bias ⊕ Z) where Z broadcasts to a shape other than the product's.
  void run_broadcast_residual(const MatMulShape& s, const Tensor& a, const Tensor& b, const Tensor* bias,
                              const Tensor& z, Tensor& y) {
    std::vector<float> af = to_f32(a), bf = to_f32(b), zf = to_f32(z), prod(static_cast<size_t>(shape_numel(s.out)));
    std::vector<float> biasf = bias ? to_f32(*bias) : std::vector<float>();
    matmul_f32(s, af.data(), bf.data(), prod.data(), nullptr, nullptr);
    apply_epilogue(prod.data(), s.batch * s.M, s.N, bias ? biasf.data() : nullptr, Activation{});
    std::vector<float> yf(static_cast<size_t>(y.numel()));
    auto plan = make_broadcast_plan<2>({s.out, z.shape()}, y.shape());
    for_each_segment(plan, 0, plan.numel, [&](int64_t o, const std::array<int64_t, 2>& off, int64_t len) {
      for (int64_t i = 0; i < len; ++i) yf[o + i] = prod[off[0] + i * plan.inner[0]] + zf[off[1] + i * plan.inner[1]];
    });
    apply_epilogue(yf.data(), y.numel(), 1, nullptr, act_);
    from_f32(yf.data(), y);
  }

  // FusedMatMul may write Y over Z when Z is read nowhere else.
  int inplace_input(int) const override { return fused_ ? 3 : -1; }

  bool fused_;
  Activation act_;
  std::unique_ptr<PackedGemm> packed_;
};

const std::vector<DType> kMatMulTypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                         DType::kInt32,   DType::kInt64,   DType::kUint32,   DType::kUint64};

}  // namespace

void register_matmul(Registry& r) {
  r.add({"MatMul", "", 1, 1000, 0, kMatMulTypes,
         [](const KernelSpec& s) { return std::make_unique<MatMulKernel>(s, false); }},
        kHeavy);
  r.add({"FusedMatMul", "mminfer", 1, 1000, 0, {DType::kFloat32, DType::kFloat16, DType::kBFloat16},
         [](const KernelSpec& s) { return std::make_unique<MatMulKernel>(s, true); }},
        {.foldable = false, .heavy = true});
}

}  // namespace mminfer::kernels
