// mminfer::Silu: y = x · sigmoid(x), times `up` when given (the SwiGLU of LLaMA-style MLPs,
// silu(gate) · up), which fuse_swiglu builds from Sigmoid and one or two Muls. The sigmoid is the
// Sigmoid kernel's own and the products are rounded in the same order, so the fused graph
// computes the same floats. `up` must have x's shape.
#include "core/parallel.h"
#include "kernels/cpu/common/elementwise_common.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/common/vector_math.h"

namespace mminfer::kernels {

namespace {

class SiluKernel final : public Kernel {
 public:
  explicit SiluKernel(const KernelSpec&) {}

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "x");
    if (const Tensor* u = up(in); u && (u->shape() != x.shape() || u->dtype() != x.dtype()))
      fail("up " + std::string(dtype_name(u->dtype())) + shape_str(u->shape()) + " must have x's dtype and shape " +
           dtype_name(x.dtype()) + shape_str(x.shape()));
    out[0] = {x.dtype(), x.shape()};
  }

  bool infers_from_shapes() const override { return true; }
  // Each element is read before its own output is written.
  int inplace_input(int) const override { return 0; }

  void run(const Inputs& in, Outputs& out) override {
    const float* x = in[0]->data<float>();
    const Tensor* u = up(in);
    const float* upv = u ? u->data<float>() : nullptr;
    float* y = out[0]->data<float>();
    parallel_for(in[0]->numel(), kGrainTranscendental, [&](int64_t b, int64_t e) {
      constexpr int64_t kChunk = 256;
      float sig[kChunk];
      for (int64_t i0 = b; i0 < e; i0 += kChunk) {
        int64_t n = std::min(kChunk, e - i0);
        vmath::map_avx2(x + i0, sig, n, vmath::sigmoid_avx2);
        if (upv)
          for (int64_t i = 0; i < n; ++i) y[i0 + i] = (x[i0 + i] * sig[i]) * upv[i0 + i];
        else
          for (int64_t i = 0; i < n; ++i) y[i0 + i] = x[i0 + i] * sig[i];
      }
    });
  }

 private:
  static const Tensor* up(const Inputs& in) { return in.size() > 1 && in[1] && in[1]->defined() ? in[1] : nullptr; }
};

}  // namespace

void register_silu(Registry& r) {
  r.add({"Silu", "mminfer", 1, 1000, 0, {DType::kFloat32}, [](const KernelSpec& s) { return std::make_unique<SiluKernel>(s); }},
        kNotFoldable);
}

}  // namespace mminfer::kernels
