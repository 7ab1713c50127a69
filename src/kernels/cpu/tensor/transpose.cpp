// Transpose, DepthToSpace and SpaceToDepth: permutations of a (reshaped) view, all done by
// the blocked strided copy in strided_copy.cpp, except float32 NCHW <-> NHWC moves.
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/common/strided_copy.h"
#include "kernels/cpu/gemm/dnnl_util.h"

namespace mminfer::kernels {

namespace {

// Moves axis 1 to the end, or the last axis to 1, keeping the others in order: the layout
// changes around channels-last convolutions (conv_channels_last pass).
bool moves_channels(const std::vector<int64_t>& perm) {
  size_t r = perm.size();
  if (r < 3 || perm[0] != 0) return false;
  bool to_last = perm[r - 1] == 1, to_first = perm[1] == static_cast<int64_t>(r - 1);
  for (size_t k = 1; k + 1 < r; ++k) {
    to_last = to_last && perm[k] == static_cast<int64_t>(k + 1);
    to_first = to_first && perm[k + 1] == static_cast<int64_t>(k);
  }
  return to_last || to_first;
}

// With a last output dim under 8 the tiled copy cannot use its 8x8 register transposes and
// oneDNN's jit reorder is 2.5x faster (an RGB image to NHWC); above, the tiled copy wins.
void transpose_with_dnnl(const float* src, float* dst, const Shape& in_shape, const std::vector<int64_t>& perm) {
  Shape out_shape = layout::permuted_shape(in_shape, perm);
  std::vector<int64_t> in_strides = layout::contiguous_strides(in_shape);
  dnnl::memory::dims strides(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) strides[k] = in_strides[static_cast<size_t>(perm[k])];
  try {
    dnnl::memory::desc src_md(dnnl::memory::dims(out_shape.begin(), out_shape.end()), dnnl::memory::data_type::f32, strides);
    dnnl::memory s(src_md, dnnl_engine(), const_cast<float*>(src)), d(plain_desc(out_shape), dnnl_engine(), dst);
    dnnl::reorder(s, d).execute(dnnl_stream(), s, d);
    dnnl_stream().wait();
  } catch (const dnnl::error& e) {
    fail_dnnl("transpose reorder", e);
  }
}

class TransposeKernel final : public Kernel {
 public:
  explicit TransposeKernel(const KernelSpec& s) : perm_attr_(s.a().get_ints("perm")), has_perm_(s.a().has("perm")) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "data");
    perm_ = perm_for(x.rank());
    out[0] = {x.dtype(), layout::permuted_shape(x.shape(), perm_)};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    perm_ = perm_for(x.rank());
    if (x.dtype() == DType::kFloat32 && x.rank() <= 6 && x.numel() > 0 && moves_channels(perm_) &&
        x.dim(perm_.back()) < 8)
      transpose_with_dnnl(x.data<float>(), out[0]->data<float>(), x.shape(), perm_);
    else
      layout::transpose(x.raw(), out[0]->raw(), dtype_size(x.dtype()), x.shape(), perm_);
  }
  // The bytes stay in place when the dimensions longer than 1 keep their order ([1, 1, H, D] to
  // [1, H, 1, D], as a decode step's attention transposes are). perm_ is the one infer, which
  // the executor calls first, set for this input's rank.
  int view_input(int, const Inputs& in, const std::vector<TensorDesc>&, int64_t* byte_offset) const override {
    const Shape& x = in[0]->shape();
    if (perm_.size() != x.size()) return -1;
    int64_t last = -1;
    for (int64_t a : perm_) {
      if (x[static_cast<size_t>(a)] == 1) continue;
      if (a < last) return -1;
      last = a;
    }
    *byte_offset = 0;
    return 0;
  }

 private:
  std::vector<int64_t> perm_for(size_t rank) const {
    if (!has_perm_) {
      std::vector<int64_t> p(rank);
      for (size_t k = 0; k < rank; ++k) p[k] = static_cast<int64_t>(rank - 1 - k);
      return p;
    }
    if (perm_attr_.size() != rank)
      fail("perm has " + std::to_string(perm_attr_.size()) + " entries but the input has rank " + std::to_string(rank));
    std::vector<bool> seen(rank, false);
    std::vector<int64_t> p(rank);
    for (size_t k = 0; k < rank; ++k) {
      int64_t a = normalize_axis(perm_attr_[k], static_cast<int64_t>(rank), "perm axis");
      if (seen[static_cast<size_t>(a)]) fail("perm is not a permutation (axis " + std::to_string(a) + " repeats)");
      seen[static_cast<size_t>(a)] = true;
      p[k] = a;
    }
    return p;
  }
  std::vector<int64_t> perm_attr_, perm_;
  bool has_perm_;
};

// Both ops are a reshape to 6-D, a transpose and a reshape back to 4-D.
struct BlockView {
  Shape view;                 // the 6-D shape the input is read as
  std::vector<int64_t> perm;  // the transpose applied to it
  Shape out;                  // the 4-D output
};

class BlockKernel : public Kernel {
 public:
  explicit BlockKernel(const KernelSpec& s) : block_(s.a().get_int("blocksize", 0)) {
    if (block_ <= 0) fail("blocksize must be positive, got " + std::to_string(block_));
  }
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "input");
    if (x.rank() != 4) fail("input must be 4-D (N, C, H, W), got " + shape_str(x.shape()));
    out[0] = {x.dtype(), plan(x.shape()).out};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    BlockView b = plan(x.shape());
    layout::transpose(x.raw(), out[0]->raw(), dtype_size(x.dtype()), b.view, b.perm);
  }

 protected:
  virtual BlockView plan(const Shape& s) const = 0;
  int64_t block_;
};

class DepthToSpaceKernel final : public BlockKernel {
 public:
  explicit DepthToSpaceKernel(const KernelSpec& s) : BlockKernel(s), crd_(s.a().get_string("mode", "DCR") == "CRD") {
    std::string mode = s.a().get_string("mode", "DCR");
    if (mode != "DCR" && mode != "CRD") fail("mode must be DCR or CRD, got '" + mode + "'");
  }

 private:
  BlockView plan(const Shape& s) const override {
    int64_t n = s[0], c = s[1], h = s[2], w = s[3], b = block_;
    if (c % (b * b) != 0)
      fail("channels " + std::to_string(c) + " are not divisible by blocksize^2 = " + std::to_string(b * b));
    int64_t oc = c / (b * b);
    Shape out = {n, oc, h * b, w * b};
    if (crd_) return {{n, oc, b, b, h, w}, {0, 1, 4, 2, 5, 3}, out};
    return {{n, b, b, oc, h, w}, {0, 3, 4, 1, 5, 2}, out};
  }
  bool crd_;
};

class SpaceToDepthKernel final : public BlockKernel {
 public:
  using BlockKernel::BlockKernel;

 private:
  BlockView plan(const Shape& s) const override {
    int64_t n = s[0], c = s[1], h = s[2], w = s[3], b = block_;
    if (h % b != 0 || w % b != 0)
      fail("spatial size " + std::to_string(h) + "x" + std::to_string(w) + " is not divisible by blocksize " +
           std::to_string(b));
    return {{n, c, h / b, b, w / b, b}, {0, 3, 5, 1, 2, 4}, {n, c * b * b, h / b, w / b}};
  }
};

template <typename K>
KernelFactory make() {
  return [](const KernelSpec& s) -> std::unique_ptr<Kernel> { return std::make_unique<K>(s); };
}

}  // namespace

void register_transpose_ops(Registry& r) {
  r.add({"Transpose", "", 1, 1000, 0, kAllTypes, make<TransposeKernel>()});
  r.add({"DepthToSpace", "", 1, 1000, 0, kAllTypes, make<DepthToSpaceKernel>()});
  r.add({"SpaceToDepth", "", 1, 1000, 0, kAllTypes, make<SpaceToDepthKernel>()});
}

}  // namespace mminfer::kernels
