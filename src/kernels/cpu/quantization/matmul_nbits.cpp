// The MatMulNBits kernel (com.microsoft): checks the attributes and inputs against the op's
// contract (matmul_nbits.h) once per shape, then runs the fast path (integer dot products for
// accuracy_level 4, FP32 otherwise), or the reference for the forms it leaves out (2 bits, g_idx).
#include <string>
#include <vector>

#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/quantization/matmul_nbits.h"

namespace mminfer::kernels {

namespace {

const Tensor* optional_input(const Inputs& in, size_t i) {
  return i < in.size() && in[i] && in[i]->defined() ? in[i] : nullptr;
}

class MatMulNBitsKernel : public Kernel {
 public:
  explicit MatMulNBitsKernel(const KernelSpec& spec) : name_(spec.name) {
    const Attributes& a = spec.a();
    if (!a.has("K") || !a.has("N") || !a.has("block_size")) bad("needs attributes K, N and block_size");
    K_ = a.get_int("K", 0);
    N_ = a.get_int("N", 0);
    bits_ = static_cast<int>(a.get_int("bits", 4));
    block_size_ = a.get_int("block_size", 0);
    if (K_ <= 0 || N_ <= 0) bad("K and N must be positive, got K=" + std::to_string(K_) + " N=" + std::to_string(N_));
    if (bits_ != 2 && bits_ != 4 && bits_ != 8) bad("bits must be 2, 4 or 8, got " + std::to_string(bits_));
    if (block_size_ < 16 || (block_size_ & (block_size_ - 1)) != 0)
      bad("block_size must be a power of two of at least 16, got " + std::to_string(block_size_));
    if (a.get_int("weight_prepacked", 0) != 0) bad("weights prepacked for another execution provider are not supported");
    // accuracy_level 4 allows int8 activations, and ONNX Runtime's CPU kernels use them for 4
    // and 8 bits: round A as they do, so files written for ONNX Runtime (onnxruntime-genai's CPU
    // INT4 models) give its outputs here too. Other levels keep FP32 activations.
    int8_activations_ = a.get_int("accuracy_level", 0) == 4 && (bits_ == 4 || bits_ == 8);
  }

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& a = need_input(in, 0, "A");
    if (a.dtype() != DType::kFloat32) bad("A must be float32, got " + std::string(dtype_name(a.dtype())));
    if (a.shape().empty() || a.shape().back() != K_)
      bad("A's last dimension must be K=" + std::to_string(K_) + ", got shape " + shape_str(a.shape()));
    check(in);
    Shape y = a.shape();
    y.back() = N_;
    out[0] = {DType::kFloat32, y};
  }

  void run(const Inputs& in, Outputs& out) override {
    NBitsWeights w = check(in);
    const int64_t M = in[0]->numel() / K_;
    if (M == 0) return;
    const Tensor* bias = optional_input(in, 5);
    const float* b = bias ? bias->data<float>() : nullptr;
    const float* a = in[0]->data<float>();
    if (int8_activations_ && matmul_nbits_fast_supported(w)) return matmul_nbits_int8(w, a, M, b, out[0]->data<float>());
    std::vector<float> rounded;
    if (int8_activations_) {
      rounded.resize(static_cast<size_t>(M * K_));
      round_activations_to_int8_blocks(a, M, K_, block_size_, rounded.data());
      a = rounded.data();
    }
    if (matmul_nbits_fast_supported(w))
      matmul_nbits_fast(w, a, M, b, out[0]->data<float>());
    else
      matmul_nbits_reference(w, a, M, b, out[0]->data<float>());
  }

  bool infers_from_shapes() const override { return true; }
 private:
  [[noreturn]] void bad(const std::string& what) const { fail("MatMulNBits '" + name_ + "': " + what); }

  void expect(const Tensor& t, const char* what, DType dtype, int64_t count) const {
    if (t.dtype() != dtype)
      bad(std::string(what) + " must be " + dtype_name(dtype) + ", got " + dtype_name(t.dtype()));
    if (t.numel() != count)
      bad(std::string(what) + " must hold " + std::to_string(count) + " values, got shape " + shape_str(t.shape()));
  }

  NBitsWeights check(const Inputs& in) const {
    NBitsWeights w;
    w.K = K_;
    w.N = N_;
    w.bits = bits_;
    w.block_size = block_size_;
    const int64_t kb = w.k_blocks();
    const Tensor& b = need_input(in, 1, "B");
    expect(b, "B", DType::kUint8, N_ * kb * w.blob_bytes());
    if (b.shape().size() != 3 && b.shape().size() != 2)
      bad("B must be [N, k_blocks, blob_size], got shape " + shape_str(b.shape()));
    const Tensor& s = need_input(in, 2, "scales");
    expect(s, "scales", DType::kFloat32, N_ * kb);
    w.packed = b.data<uint8_t>();
    w.scales = s.data<float>();
    if (const Tensor* zp = optional_input(in, 3)) {
      if (zp->dtype() == DType::kUint8) {
        expect(*zp, "zero_points", DType::kUint8, N_ * w.zp_row_bytes());
        w.zp_packed = zp->data<uint8_t>();
      } else {
        expect(*zp, "zero_points", DType::kFloat32, N_ * kb);
        w.zp_float = zp->data<float>();
      }
    }
    if (const Tensor* g = optional_input(in, 4)) {
      expect(*g, "g_idx", DType::kInt32, K_);
      const int32_t* gi = g->data<int32_t>();
      for (int64_t k = 0; k < K_; ++k)
        if (gi[k] < 0 || gi[k] >= kb) bad("g_idx[" + std::to_string(k) + "]=" + std::to_string(gi[k]) + " is not a block index");
      w.g_idx = gi;
    }
    if (const Tensor* bias = optional_input(in, 5)) expect(*bias, "bias", DType::kFloat32, N_);
    return w;
  }

  std::string name_;
  int64_t K_ = 0, N_ = 0, block_size_ = 0;
  int bits_ = 4;
  bool int8_activations_ = false;
};

}  // namespace

void register_matmul_nbits(Registry& r) {
  r.add({"MatMulNBits", "com.microsoft", 1, 1000, 0, {DType::kFloat32},
         [](const KernelSpec& spec) { return std::make_unique<MatMulNBitsKernel>(spec); }}, kHeavy);
}

}  // namespace mminfer::kernels
