// Gather, GatherElements and GatherND: read elements or slices at index positions. Every
// index is bounds-checked (negative values count from the end) before any byte moves.
#include <cstring>

#include "core/parallel.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/common/strided_copy.h"

namespace mminfer::kernels {

namespace {

const std::vector<DType> kIndexTypes = {DType::kInt32, DType::kInt64};

// Reads an index tensor, wrapping negatives and failing on values outside [-dim, dim).
std::vector<int64_t> checked_indices(const Tensor& t, int64_t dim, const char* what) {
  std::vector<int64_t> idx = read_int_tensor(t, what);
  for (int64_t& v : idx) {
    if (v < -dim || v >= dim)
      fail(std::string(what) + " value " + std::to_string(v) + " is out of range for an axis of size " +
           std::to_string(dim));
    if (v < 0) v += dim;
  }
  return idx;
}

class GatherKernel final : public Kernel {
 public:
  explicit GatherKernel(const KernelSpec& s) : axis_(s.a().get_int("axis", 0)) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "data");
    const Tensor& idx = need_input(in, 1, "indices");
    size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(x.rank()), "axis"));
    if (x.rank() == 0) fail("data must have rank >= 1");
    Shape s(x.shape().begin(), x.shape().begin() + static_cast<int64_t>(axis));
    s.insert(s.end(), idx.shape().begin(), idx.shape().end());
    s.insert(s.end(), x.shape().begin() + static_cast<int64_t>(axis) + 1, x.shape().end());
    out[0] = {x.dtype(), s};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(x.rank()), "axis"));
    int64_t dim = x.dim(axis);
    std::vector<int64_t> idx = checked_indices(*in[1], dim, "indices");
    int64_t outer = 1, inner = 1;
    for (size_t k = 0; k < x.rank(); ++k) {
      if (k < axis) outer *= x.dim(k);
      if (k > axis) inner *= x.dim(k);
    }
    size_t chunk = static_cast<size_t>(inner) * dtype_size(x.dtype());
    int64_t n = static_cast<int64_t>(idx.size());
    if (chunk == 0 || n == 0) return;
    const char* src = static_cast<const char*>(x.raw());
    char* dst = static_cast<char*>(out[0]->raw());
    parallel_for(outer * n, std::max<int64_t>(1, 32768 / static_cast<int64_t>(chunk)), [&](int64_t b, int64_t e) {
      for (int64_t u = b; u < e; ++u) {
        int64_t o = u / n, i = u % n;
        std::memcpy(dst + u * static_cast<int64_t>(chunk), src + (o * dim + idx[i]) * static_cast<int64_t>(chunk), chunk);
      }
    });
  }

 private:
  int64_t axis_;
};

template <typename T>
void gather_elements_typed(const Tensor& x, const std::vector<int64_t>& idx, const Shape& ishape, size_t axis, T* dst) {
  const T* src = x.data<T>();
  std::vector<int64_t> xs = layout::contiguous_strides(x.shape());
  std::vector<int64_t> pos(ishape.size(), 0);
  int64_t base = 0;  // data offset of pos, without the axis term
  for (size_t i = 0; i < idx.size(); ++i) {
    dst[i] = src[base + idx[i] * xs[axis]];
    for (size_t k = ishape.size(); k-- > 0;) {
      if (k != axis) base += xs[k];
      if (++pos[k] < ishape[k]) break;
      if (k != axis) base -= xs[k] * ishape[k];
      pos[k] = 0;
    }
  }
}

class GatherElementsKernel final : public Kernel {
 public:
  explicit GatherElementsKernel(const KernelSpec& s) : axis_(s.a().get_int("axis", 0)) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "data");
    const Tensor& idx = need_input(in, 1, "indices");
    check(x, idx);
    out[0] = {x.dtype(), idx.shape()};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    size_t axis = check(x, *in[1]);
    std::vector<int64_t> idx = checked_indices(*in[1], x.dim(axis), "indices");
    void* dst = out[0]->raw();
    switch (dtype_size(x.dtype())) {
      case 1: return gather_elements_typed(x, idx, in[1]->shape(), axis, static_cast<uint8_t*>(dst));
      case 2: return gather_elements_typed(x, idx, in[1]->shape(), axis, static_cast<uint16_t*>(dst));
      case 4: return gather_elements_typed(x, idx, in[1]->shape(), axis, static_cast<uint32_t*>(dst));
      case 8: return gather_elements_typed(x, idx, in[1]->shape(), axis, static_cast<uint64_t*>(dst));
      default: fail(std::string("dtype ") + dtype_name(x.dtype()) + " is not supported");
    }
  }

 private:
  size_t check(const Tensor& x, const Tensor& idx) const {
    if (x.rank() == 0 || idx.rank() != x.rank())
      fail("indices " + shape_str(idx.shape()) + " must have the same rank as data " + shape_str(x.shape()));
    size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(x.rank()), "axis"));
    for (size_t k = 0; k < x.rank(); ++k)
      if (k != axis && idx.dim(k) > x.dim(k))
        fail("indices " + shape_str(idx.shape()) + " is larger than data " + shape_str(x.shape()) + " outside the axis");
    return axis;
  }
  int64_t axis_;
};

class GatherNDKernel final : public Kernel {
 public:
  explicit GatherNDKernel(const KernelSpec& s) : batch_dims_(s.a().get_int("batch_dims", 0)) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "data");
    const Tensor& idx = need_input(in, 1, "indices");
    size_t b = check(x, idx);
    size_t m = static_cast<size_t>(idx.dim(idx.rank() - 1));
    Shape s(idx.shape().begin(), idx.shape().end() - 1);
    s.insert(s.end(), x.shape().begin() + static_cast<int64_t>(b + m), x.shape().end());
    out[0] = {x.dtype(), s};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    const Tensor& it = *in[1];
    size_t b = check(x, it);
    size_t m = static_cast<size_t>(it.dim(it.rank() - 1));
    std::vector<int64_t> idx = read_int_tensor(it, "indices");
    std::vector<int64_t> xs = layout::contiguous_strides(x.shape());
    int64_t batches = 1, tuples = 1;
    for (size_t k = 0; k + 1 < it.rank(); ++k) (k < b ? batches : tuples) *= it.dim(k);
    size_t es = dtype_size(x.dtype());
    int64_t slice = 1;
    for (size_t k = b + m; k < x.rank(); ++k) slice *= x.dim(k);
    int64_t batch_stride = b == 0 ? 0 : xs[b - 1];
    size_t chunk = static_cast<size_t>(slice) * es;
    const char* src = static_cast<const char*>(x.raw());
    char* dst = static_cast<char*>(out[0]->raw());
    for (int64_t bi = 0; bi < batches; ++bi)
      for (int64_t t = 0; t < tuples; ++t) {
        const int64_t* tuple = idx.data() + (bi * tuples + t) * static_cast<int64_t>(m);
        int64_t off = bi * batch_stride;
        for (size_t j = 0; j < m; ++j) {
          int64_t dim = x.dim(b + j), v = tuple[j];
          if (v < -dim || v >= dim)
            fail("indices value " + std::to_string(v) + " is out of range for data axis " + std::to_string(b + j) +
                 " of size " + std::to_string(dim));
          off += (v < 0 ? v + dim : v) * xs[b + j];
        }
        if (chunk) std::memcpy(dst + (bi * tuples + t) * static_cast<int64_t>(chunk), src + off * static_cast<int64_t>(es), chunk);
      }
  }

 private:
  size_t check(const Tensor& x, const Tensor& idx) const {
    if (x.rank() < 1 || idx.rank() < 1) fail("data and indices must have rank >= 1");
    if (batch_dims_ < 0 || static_cast<size_t>(batch_dims_) >= std::min(x.rank(), idx.rank()))
      fail("batch_dims " + std::to_string(batch_dims_) + " must be below the ranks of data and indices");
    size_t b = static_cast<size_t>(batch_dims_);
    for (size_t k = 0; k < b; ++k)
      if (x.dim(k) != idx.dim(k))
        fail("batch dims of data " + shape_str(x.shape()) + " and indices " + shape_str(idx.shape()) + " differ");
    int64_t m = idx.dim(idx.rank() - 1);
    if (m < 1 || static_cast<size_t>(m) > x.rank() - b)
      fail("indices last dim " + std::to_string(m) + " must be in [1, " + std::to_string(x.rank() - b) + "]");
    return b;
  }
  int64_t batch_dims_;
};

template <typename K>
KernelFactory make() {
  return [](const KernelSpec& s) -> std::unique_ptr<Kernel> { return std::make_unique<K>(s); };
}

}  // namespace

void register_gather_scatter(Registry& r) {
  r.add({"Gather", "", 1, 1000, 1, kIndexTypes, make<GatherKernel>()});
  r.add({"GatherElements", "", 11, 1000, 1, kIndexTypes, make<GatherElementsKernel>()});
  r.add({"GatherND", "", 11, 1000, 1, {DType::kInt64}, make<GatherNDKernel>()});
}

}  // namespace mminfer::kernels
