// Expand (broadcast to a shape) and Tile (repeat along each axis): both are strided copies
// with zero strides over the repeated dims.
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/common/strided_copy.h"

namespace mminfer::kernels {

namespace {

class ExpandKernel final : public Kernel {
 public:
  explicit ExpandKernel(const KernelSpec&) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "input");
    std::vector<int64_t> target = read_int_tensor(need_input(in, 1, "shape"), "shape");
    size_t r = std::max(x.rank(), target.size());
    Shape s(r);
    for (size_t k = 0; k < r; ++k) {
      int64_t a = k + x.rank() >= r ? x.dim(k + x.rank() - r) : 1;
      int64_t b = k + target.size() >= r ? target[k + target.size() - r] : 1;
      if (b < 0) fail("shape has negative dim " + std::to_string(b));
      if (a != b && a != 1 && b != 1)
        fail("cannot broadcast input " + shape_str(x.shape()) + " to shape " + shape_str(target));
      s[k] = a == 1 ? b : a;
    }
    out[0] = {x.dtype(), s};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    const Shape& s = out[0]->shape();
    std::vector<int64_t> in_strides = layout::contiguous_strides(x.shape()), strides(s.size(), 0);
    size_t lead = s.size() - x.rank();
    for (size_t k = 0; k < x.rank(); ++k) strides[lead + k] = x.dim(k) == 1 ? 0 : in_strides[k];
    layout::strided_copy(x.raw(), out[0]->raw(), dtype_size(x.dtype()), s, strides, 0);
  }
};

class TileKernel final : public Kernel {
 public:
  explicit TileKernel(const KernelSpec&) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "input");
    std::vector<int64_t> reps = repeats(in);
    Shape s(x.rank());
    for (size_t k = 0; k < x.rank(); ++k) s[k] = x.dim(k) * reps[k];
    out[0] = {x.dtype(), s};
  }
  void run(const Inputs& in, Outputs& out) override {
    // Output dim k of size r*d is row-major (r, d): read it as a 2r-D view whose repeat dims
    // have stride 0.
    const Tensor& x = *in[0];
    std::vector<int64_t> reps = repeats(in), in_strides = layout::contiguous_strides(x.shape()), strides;
    Shape view;
    for (size_t k = 0; k < x.rank(); ++k) {
      view.insert(view.end(), {reps[k], x.dim(k)});
      strides.insert(strides.end(), {0, in_strides[k]});
    }
    layout::strided_copy(x.raw(), out[0]->raw(), dtype_size(x.dtype()), view, strides, 0);
  }

 private:
  static std::vector<int64_t> repeats(const Inputs& in) {
    const Tensor& x = *in[0];
    std::vector<int64_t> reps = read_int_tensor(need_input(in, 1, "repeats"), "repeats");
    if (reps.size() != x.rank())
      fail("repeats has " + std::to_string(reps.size()) + " entries but the input has rank " + std::to_string(x.rank()));
    for (int64_t v : reps)
      if (v < 0) fail("repeats has negative value " + std::to_string(v));
    return reps;
  }
};

template <typename K>
KernelFactory make() {
  return [](const KernelSpec& s) -> std::unique_ptr<Kernel> { return std::make_unique<K>(s); };
}

}  // namespace

void register_expand_tile(Registry& r) {
  r.add({"Expand", "", 8, 1000, 0, kAllTypes, make<ExpandKernel>()});
  r.add({"Tile", "", 6, 1000, 0, kAllTypes, make<TileKernel>()});
}

}  // namespace mminfer::kernels
