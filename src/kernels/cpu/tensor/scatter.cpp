// Scatter (deprecated), ScatterElements and ScatterND: copy data, then write (or combine,
// with a reduction) updates at index positions. Duplicate indices apply in order.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/common/numeric_visit.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/common/strided_copy.h"

namespace mminfer::kernels {

namespace {

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

Reduction parse_reduction(const KernelSpec& s) {
  std::string r = s.a().get_string("reduction", "none");
  if (r == "none") return Reduction::kNone;
  if (r == "add" && s.opset >= 16) return Reduction::kAdd;
  if (r == "mul" && s.opset >= 16) return Reduction::kMul;
  if (r == "max" && s.opset >= 18) return Reduction::kMax;
  if (r == "min" && s.opset >= 18) return Reduction::kMin;
  fail("reduction '" + r + "' is not supported in opset " + std::to_string(s.opset));
}

// Combines `count` updates into dst[dst_off..] for each (dst_off, upd_off) pair.
struct Writes {
  std::vector<int64_t> dst, upd;
  int64_t count = 1;  // elements per write
};

void apply(Tensor& y, const Tensor& updates, const Writes& w, Reduction red) {
  if (red == Reduction::kNone) {
    size_t es = dtype_size(y.dtype()), bytes = static_cast<size_t>(w.count) * es;
    char* d = static_cast<char*>(y.raw());
    const char* u = static_cast<const char*>(updates.raw());
    for (size_t i = 0; i < w.dst.size(); ++i)
      std::memcpy(d + w.dst[i] * static_cast<int64_t>(es), u + w.upd[i] * static_cast<int64_t>(es), bytes);
    return;
  }
  visit_numeric(y.dtype(), "data", [&](auto tag) {
    using N = decltype(tag);
    using S = typename N::Storage;
    using C = typename N::Compute;
    S* d = y.data<S>();
    const S* u = updates.data<S>();
    for (size_t i = 0; i < w.dst.size(); ++i)
      for (int64_t j = 0; j < w.count; ++j) {
        C a = N::load(d[w.dst[i] + j]), b = N::load(u[w.upd[i] + j]);
        C r;
        switch (red) {
          case Reduction::kAdd: r = static_cast<C>(a + b); break;
          case Reduction::kMul: r = static_cast<C>(a * b); break;
          case Reduction::kMax: r = std::max(a, b); break;
          default: r = std::min(a, b); break;
        }
        d[w.dst[i] + j] = N::store(r);
      }
  });
}

class ScatterElementsKernel final : public Kernel {
 public:
  explicit ScatterElementsKernel(const KernelSpec& s) : axis_(s.a().get_int("axis", 0)), red_(parse_reduction(s)) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "data");
    check(x, need_input(in, 1, "indices"), need_input(in, 2, "updates"));
    out[0] = {x.dtype(), x.shape()};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    const Tensor& it = *in[1];
    const Tensor& upd = *in[2];
    size_t axis = check(x, it, upd);
    std::memcpy(out[0]->raw(), x.raw(), x.nbytes());
    std::vector<int64_t> idx = read_int_tensor(it, "indices");
    std::vector<int64_t> xs = layout::contiguous_strides(x.shape());
    const Shape& ishape = it.shape();
    int64_t dim = x.dim(axis);
    Writes w;
    w.dst.reserve(idx.size());
    w.upd.reserve(idx.size());
    std::vector<int64_t> pos(ishape.size(), 0);
    int64_t base = 0;
    for (size_t i = 0; i < idx.size(); ++i) {
      int64_t v = idx[i];
      if (v < -dim || v >= dim)
        fail("indices value " + std::to_string(v) + " is out of range for an axis of size " + std::to_string(dim));
      w.dst.push_back(base + (v < 0 ? v + dim : v) * xs[axis]);
      w.upd.push_back(static_cast<int64_t>(i));
      for (size_t k = ishape.size(); k-- > 0;) {
        if (k != axis) base += xs[k];
        if (++pos[k] < ishape[k]) break;
        if (k != axis) base -= xs[k] * ishape[k];
        pos[k] = 0;
      }
    }
    apply(*out[0], upd, w, red_);
  }

 private:
  size_t check(const Tensor& x, const Tensor& idx, const Tensor& upd) const {
    if (x.rank() == 0 || idx.rank() != x.rank())
      fail("indices " + shape_str(idx.shape()) + " must have the same rank as data " + shape_str(x.shape()));
    if (upd.shape() != idx.shape())
      fail("updates " + shape_str(upd.shape()) + " must have the shape of indices " + shape_str(idx.shape()));
    if (upd.dtype() != x.dtype()) fail("updates dtype differs from data dtype");
    size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(x.rank()), "axis"));
    for (size_t k = 0; k < x.rank(); ++k)
      if (k != axis && idx.dim(k) > x.dim(k))
        fail("indices " + shape_str(idx.shape()) + " is larger than data " + shape_str(x.shape()) + " outside the axis");
    return axis;
  }
  int64_t axis_;
  Reduction red_;
};

class ScatterNDKernel final : public Kernel {
 public:
  explicit ScatterNDKernel(const KernelSpec& s) : red_(parse_reduction(s)) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "data");
    check(x, need_input(in, 1, "indices"), need_input(in, 2, "updates"));
    out[0] = {x.dtype(), x.shape()};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    const Tensor& it = *in[1];
    const Tensor& upd = *in[2];
    size_t m = check(x, it, upd);
    std::memcpy(out[0]->raw(), x.raw(), x.nbytes());
    std::vector<int64_t> idx = read_int_tensor(it, "indices");
    std::vector<int64_t> xs = layout::contiguous_strides(x.shape());
    Writes w;
    w.count = 1;
    for (size_t k = m; k < x.rank(); ++k) w.count *= x.dim(k);
    int64_t tuples = m == 0 ? 0 : static_cast<int64_t>(idx.size() / m);
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t off = 0;
      for (size_t j = 0; j < m; ++j) {
        int64_t dim = x.dim(j), v = idx[static_cast<size_t>(t) * m + j];
        if (v < -dim || v >= dim)
          fail("indices value " + std::to_string(v) + " is out of range for data axis " + std::to_string(j) +
               " of size " + std::to_string(dim));
        off += (v < 0 ? v + dim : v) * xs[j];
      }
      w.dst.push_back(off);
      w.upd.push_back(t * w.count);
    }
    apply(*out[0], upd, w, red_);
  }

 private:
  size_t check(const Tensor& x, const Tensor& idx, const Tensor& upd) const {
    if (idx.rank() < 1) fail("indices must have rank >= 1");
    int64_t m = idx.dim(idx.rank() - 1);
    if (m < 1 || static_cast<size_t>(m) > x.rank())
      fail("indices last dim " + std::to_string(m) + " must be in [1, " + std::to_string(x.rank()) + "]");
    Shape want(idx.shape().begin(), idx.shape().end() - 1);
    want.insert(want.end(), x.shape().begin() + m, x.shape().end());
    if (upd.shape() != want) fail("updates has shape " + shape_str(upd.shape()) + ", expected " + shape_str(want));
    if (upd.dtype() != x.dtype()) fail("updates dtype differs from data dtype");
    return static_cast<size_t>(m);
  }
  Reduction red_;
};

template <typename K>
KernelFactory make() {
  return [](const KernelSpec& s) -> std::unique_ptr<Kernel> { return std::make_unique<K>(s); };
}

}  // namespace

void register_scatter(Registry& r) {
  r.add({"Scatter", "", 9, 10, 1, {DType::kInt32, DType::kInt64}, make<ScatterElementsKernel>()});
  r.add({"ScatterElements", "", 11, 1000, 1, {DType::kInt32, DType::kInt64}, make<ScatterElementsKernel>()});
  r.add({"ScatterND", "", 11, 1000, 1, {DType::kInt64}, make<ScatterNDKernel>()});
}

}  // namespace mminfer::kernels
