// ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare. The reduced axes are folded
// into a [outer, k, inner] view (reduced dims transposed to the back first when they are not
// one contiguous block); float32 runs AVX2 rows or columns, other dtypes the generic path.
#include <algorithm>
#include <cstring>

#include "core/parallel.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/common/strided_copy.h"
#include "kernels/cpu/math/reduce_generic.h"
#include "kernels/cpu/math/reduce_simd.h"

namespace mminfer::kernels {

namespace {

using reduce_simd::ReduceKind;

struct ReducePlan {
  Shape out_shape;
  bool noop = false;           // output is a copy of the input
  std::vector<int64_t> perm;   // non-empty: transpose the input by perm first
  int64_t outer = 1, k = 1, inner = 1;
};

class ReduceKernel final : public Kernel {
 public:
  ReduceKernel(const KernelSpec& s, ReduceKind kind, int axes_input_since)
      : kind_(kind),
        keepdims_(s.a().get_int("keepdims", 1) != 0),
        noop_with_empty_axes_(s.a().get_int("noop_with_empty_axes", 0) != 0),
        axes_from_input_(s.opset >= axes_input_since),
        attr_axes_(s.a().get_ints("axes")) {}

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "data");
    out[0] = {x.dtype(), make_plan(in).out_shape};
  }

  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    Tensor& y = *out[0];
    ReducePlan p = make_plan(in);
    if (p.noop) {
      if (x.nbytes()) std::memcpy(y.raw(), x.raw(), x.nbytes());
      return;
    }
    if (y.numel() == 0) return;
    const void* src = x.raw();
    Tensor moved;
    if (!p.perm.empty() && x.numel() > 0) {
      moved = Tensor::empty(x.dtype(), layout::permuted_shape(x.shape(), p.perm));
      layout::transpose(x.raw(), moved.raw(), dtype_size(x.dtype()), x.shape(), p.perm);
      src = moved.raw();
    }
    if (x.dtype() == DType::kFloat32) {
      reduce_f32(static_cast<const float*>(src), p, y.data<float>());
      return;
    }
    visit_numeric(x.dtype(), "data", [&](auto tag) {
      using N = decltype(tag);
      using S = typename N::Storage;
      reduce_generic::reduce<N>(kind_, static_cast<const S*>(src), p.outer, p.k, p.inner, y.data<S>());
    });
  }

 private:
  void reduce_f32(const float* x, const ReducePlan& p, float* y) const {
    ReduceKind kind = kind_;
    int64_t k = p.k, inner = p.inner;
    if (inner == 1) {
      int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, k));
      parallel_for(p.outer, grain, [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) y[o] = reduce_simd::reduce_row_avx2(kind, x + o * k, k);
      });
      return;
    }
    // Columns: split each outer slice into blocks of columns so small `outer` still spreads.
    constexpr int64_t kBlock = 512;
    int64_t blocks = (inner + kBlock - 1) / kBlock;
    int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, k * std::min(inner, kBlock)));
    parallel_for(p.outer * blocks, grain, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        int64_t o = t / blocks, j0 = (t % blocks) * kBlock, w = std::min(kBlock, inner - j0);
        reduce_simd::reduce_cols_avx2(kind, x + o * k * inner + j0, k, w, inner, y + o * inner + j0);
      }
    });
  }

  std::vector<int64_t> requested_axes(const Inputs& in, bool& given) const {
    given = false;
    if (axes_from_input_) {
      if (in.size() > 1 && in[1] && in[1]->defined()) {
        given = true;
        return read_int_tensor(*in[1], "axes");
      }
      if (!attr_axes_.empty()) given = true;  // tolerate older-style files
      return attr_axes_;
    }
    given = !attr_axes_.empty();
    return attr_axes_;
  }

  ReducePlan make_plan(const Inputs& in) const {
    const Tensor& x = need_input(in, 0, "data");
    const Shape& shape = x.shape();
    int64_t rank = static_cast<int64_t>(shape.size());
    bool given = false;
    std::vector<int64_t> axes = requested_axes(in, given);
    ReducePlan p;
    if (axes.empty() && noop_with_empty_axes_) {
      p.noop = true;
      p.out_shape = shape;
      return p;
    }
    std::vector<bool> reduced(shape.size(), axes.empty());
    for (int64_t a : axes) {
      int64_t n = normalize_axis(a, rank, "axes value");
      if (rank == 0) continue;
      if (reduced[n]) fail("axes lists axis " + std::to_string(a) + " twice");
      reduced[n] = true;
    }
    for (size_t d = 0; d < shape.size(); ++d) {
      if (!reduced[d]) p.out_shape.push_back(shape[d]);
      else if (keepdims_) p.out_shape.push_back(1);
    }
    // Dims of size 1 do not matter; see whether the reduced ones form one block.
    std::vector<size_t> kept_dims, red_dims;
    bool contiguous = true;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 1) continue;
      if (!reduced[d]) {
        kept_dims.push_back(d);
      } else {
        if (!red_dims.empty() && !kept_dims.empty() && kept_dims.back() > red_dims.back()) contiguous = false;
        red_dims.push_back(d);
      }
    }
    for (size_t d : red_dims) p.k *= shape[d];
    if (contiguous) {
      for (size_t d : kept_dims) (red_dims.empty() || d < red_dims.front() ? p.outer : p.inner) *= shape[d];
      return p;
    }
    for (size_t d = 0; d < shape.size(); ++d)
      if (!reduced[d]) p.perm.push_back(static_cast<int64_t>(d));
    for (size_t d = 0; d < shape.size(); ++d)
      if (reduced[d]) p.perm.push_back(static_cast<int64_t>(d));
    for (size_t d : kept_dims) p.outer *= shape[d];
    return p;
  }

  ReduceKind kind_;
  bool keepdims_, noop_with_empty_axes_, axes_from_input_;
  std::vector<int64_t> attr_axes_;
};

void add_reduce(Registry& r, const char* op, ReduceKind kind, int axes_input_since, std::vector<DType> types) {
  r.add({op, "", 1, 1000, 0, std::move(types), [kind, axes_input_since](const KernelSpec& s) -> std::unique_ptr<Kernel> {
           return std::make_unique<ReduceKernel>(s, kind, axes_input_since);
         }});
}

}  // namespace

void register_reductions(Registry& r) {
  std::vector<DType> numeric = kNumericTypes;
  numeric.push_back(DType::kBFloat16);
  std::vector<DType> with_bool = numeric;
  with_bool.push_back(DType::kBool);  // ReduceMax/Min accept bool from opset 20
  add_reduce(r, "ReduceSum", ReduceKind::kSum, 13, numeric);
  add_reduce(r, "ReduceMean", ReduceKind::kMean, 18, numeric);
  add_reduce(r, "ReduceMax", ReduceKind::kMax, 18, with_bool);
  add_reduce(r, "ReduceMin", ReduceKind::kMin, 18, with_bool);
  add_reduce(r, "ReduceProd", ReduceKind::kProd, 18, numeric);
  add_reduce(r, "ReduceL1", ReduceKind::kL1, 18, numeric);
  add_reduce(r, "ReduceL2", ReduceKind::kL2, 18, numeric);
  add_reduce(r, "ReduceLogSum", ReduceKind::kLogSum, 18, numeric);
  add_reduce(r, "ReduceLogSumExp", ReduceKind::kLogSumExp, 18, numeric);
  add_reduce(r, "ReduceSumSquare", ReduceKind::kSumSquare, 18, numeric);
}

}  // namespace mminfer::kernels
