// mminfer.MatMulNBitsTiled: com.microsoft MatMulNBits at accuracy_level 4 with its weight in the
// tiled layout (nbits_tiled.h), as passes/tile_nbits_weights.cpp writes it when a model loads on
// a CPU with AVX-512 VNNI. Inputs: A, codes, scales, zero points, optional bias; attributes K, N,
// bits and block_size as MatMulNBits has them.
#include <string>

#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/quantization/nbits_tiled.h"

namespace mminfer::kernels {

namespace {

class MatMulNBitsTiledKernel : public Kernel {
 public:
  explicit MatMulNBitsTiledKernel(const KernelSpec& spec) : name_(spec.name) {
    const Attributes& a = spec.a();
    t_.K = a.get_int("K", 0);
    t_.N = a.get_int("N", 0);
    t_.bits = static_cast<int>(a.get_int("bits", 0));
    t_.block_size = a.get_int("block_size", 0);
    if (t_.K <= 0 || t_.N <= 0) bad("K and N must be positive, got K=" + std::to_string(t_.K) + " N=" + std::to_string(t_.N));
    if (t_.bits != 4 && t_.bits != 8) bad("bits must be 4 or 8, got " + std::to_string(t_.bits));
    if (t_.block_size < 16 || (t_.block_size & (t_.block_size - 1)) != 0)
      bad("block_size must be a power of two of at least 16, got " + std::to_string(t_.block_size));
    if (!nbits_tiled_cpu()) bad("this CPU lacks AVX-512 VNNI, which the tiled weight layout needs");
  }

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& a = need_input(in, 0, "A");
    if (a.dtype() != DType::kFloat32) bad("A must be float32, got " + std::string(dtype_name(a.dtype())));
    if (a.shape().empty() || a.shape().back() != t_.K)
      bad("A's last dimension must be K=" + std::to_string(t_.K) + ", got shape " + shape_str(a.shape()));
    check(in);
    Shape y = a.shape();
    y.back() = t_.N;
    out[0] = {DType::kFloat32, y};
  }

  void run(const Inputs& in, Outputs& out) override {
    NBitsTiled t = check(in);
    const int64_t M = in[0]->numel() / t_.K;
    if (M == 0) return;
    const Tensor* bias = in.size() > 4 && in[4] && in[4]->defined() ? in[4] : nullptr;
    matmul_nbits_tiled(t, in[0]->data<float>(), M, bias ? bias->data<float>() : nullptr, out[0]->data<float>());
  }

  bool infers_from_shapes() const override { return true; }
 private:
  [[noreturn]] void bad(const std::string& what) const { fail("MatMulNBitsTiled '" + name_ + "': " + what); }

  void expect(const Inputs& in, size_t i, const char* what, DType dtype, int64_t count) const {
    const Tensor& t = need_input(in, i, what);
    if (t.dtype() != dtype) bad(std::string(what) + " must be " + dtype_name(dtype) + ", got " + dtype_name(t.dtype()));
    if (t.numel() != count) bad(std::string(what) + " must hold " + std::to_string(count) + " values, got shape " + shape_str(t.shape()));
  }

  NBitsTiled check(const Inputs& in) const {
    NBitsTiled t = t_;
    expect(in, 1, "codes", DType::kUint8, t.code_bytes());
    expect(in, 2, "scales", DType::kFloat32, t.block_values());
    expect(in, 3, "zero_points", DType::kUint8, t.block_values());
    if (in.size() > 4 && in[4] && in[4]->defined()) expect(in, 4, "bias", DType::kFloat32, t.N);
    t.codes = in[1]->data<uint8_t>();
    t.scales = in[2]->data<float>();
    t.zero_points = in[3]->data<uint8_t>();
    return t;
  }

  std::string name_;
  NBitsTiled t_;
};

}  // namespace

void register_matmul_nbits_tiled(Registry& r) {
  // Not foldable: a constant A would only meet this op if it was written by hand.
  r.add({"MatMulNBitsTiled", "mminfer", 1, 1000, 0, {DType::kFloat32},
         [](const KernelSpec& spec) { return std::make_unique<MatMulNBitsTiledKernel>(spec); }},
        KernelTraits{.foldable = false, .heavy = true});
}

}  // namespace mminfer::kernels
