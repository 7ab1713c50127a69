// BinaryKernel: two inputs of one dtype, numpy broadcasting (or the pre-opset-7 `broadcast`/`axis`
// attributes, or PRelu's one-way broadcast), output of the same dtype or bool.
#pragma once
#include <string>

#include "core/parallel.h"
#include "kernels/cpu/common/broadcast.h"
#include "kernels/cpu/common/elementwise_common.h"
#include "kernels/cpu/math/binary_ops.h"

namespace mminfer::kernels {

// `op` over one run of len outputs, each input read with its stride (1, or 0 for a repeated
// element): the vector form where the op has one, else the scalar loop.
template <typename Op, typename T, typename O>
void run_binary_segment(const Op& op, const T* a, int64_t sa, const T* b, int64_t sb, O* out, int64_t len) {
  if constexpr (std::is_same_v<T, float> && std::is_same_v<O, float> &&
                requires { op.f32(a, int64_t(0), b, int64_t(0), out, int64_t(0)); }) {
    op.f32(a, sa, b, sb, out, len);
  } else {
    binop::strided_loop([&op](T x, T y) { return static_cast<O>(op(x, y)); }, a, sa, b, sb, out, len);
  }
}

// Runs `op` over a broadcast plan: T inputs, O output (bool ops write bytes).
template <typename Op, typename T, typename O>
void run_binary_typed(const Op& op, const T* a, const T* b, O* out, const BroadcastPlan<2>& plan) {
  parallel_for(plan.numel, kGrainCheap, [&](int64_t begin, int64_t end) {
    for_each_segment<2>(plan, begin, end, [&](int64_t o, const std::array<int64_t, 2>& off, int64_t len) {
      run_binary_segment(op, a + off[0], plan.inner[0], b + off[1], plan.inner[1], out + o, len);
    });
  });
}

// The same over inputs of one shape: a single flat run, no plan to build (a decode step's
// residual adds are 576 floats, where building the plan cost as much as the adding).
template <typename Op, typename T, typename O>
void run_binary_flat(const Op& op, const T* a, const T* b, O* out, int64_t n) {
  parallel_for(n, kGrainCheap, [&](int64_t begin, int64_t end) {
    run_binary_segment(op, a + begin, 1, b + begin, 1, out + begin, end - begin);
  });
}

template <typename Op>
class BinaryKernel : public Kernel {
 public:
  BinaryKernel(const KernelSpec& s, Op op, bool unidirectional = false) : op_(op), unidirectional_(unidirectional) {
    if (s.opset < 7 && !unidirectional) {
      legacy_ = true;
      legacy_broadcast_ = s.a().get_int("broadcast", 0) != 0;
      has_axis_ = s.a().has("axis");
      axis_ = s.a().get_int("axis", 0);
    }
  }

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& a = need_input(in, 0, "A");
    const Tensor& b = need_input(in, 1, "B");
    if (a.dtype() != b.dtype())
      fail(std::string("inputs have different dtypes: ") + dtype_name(a.dtype()) + " and " + dtype_name(b.dtype()));
    Shape bs = b_shape(a.shape(), b.shape());
    Shape os;
    if (unidirectional_ || legacy_) {
      if (!broadcasts_to(bs, a.shape()))
        fail("input B shape " + shape_str(b.shape()) + " does not broadcast to input A shape " + shape_str(a.shape()));
      os = a.shape();
    } else {
      os = broadcast_shapes({a.shape(), bs});
    }
    out[0] = {Op::kBoolOut ? DType::kBool : a.dtype(), os};
  }

  bool infers_from_shapes() const override { return true; }
  int inplace_input(int) const override { return Op::kBoolOut ? -1 : 0; }

  void run(const Inputs& in, Outputs& out) override {
    const Tensor& a = *in[0];
    const Tensor& b = *in[1];
    Tensor& y = *out[0];
    DType t = a.dtype();
    using BoolOrT = std::conditional_t<Op::kBoolOut, uint8_t, void>;
    if (t == DType::kFloat32 && a.shape() == b.shape()) {
      if constexpr (Op::kBoolOut)
        run_binary_flat(op_, a.data<float>(), b.data<float>(), y.data<uint8_t>(), a.numel());
      else
        run_binary_flat(op_, a.data<float>(), b.data<float>(), y.data<float>(), a.numel());
      return;
    }
    auto plan = make_broadcast_plan<2>({a.shape(), b_shape(a.shape(), b.shape())}, y.shape());
    if (is_half_type(t)) {
      Tensor af = half_tensor_to_float(a), bf = half_tensor_to_float(b);
      if constexpr (Op::kBoolOut) {
        run_binary_typed(op_, af.data<float>(), bf.data<float>(), y.data<uint8_t>(), plan);
      } else {
        Tensor yf = Tensor::empty(DType::kFloat32, y.shape());
        run_binary_typed(op_, af.data<float>(), bf.data<float>(), yf.data<float>(), plan);
        float_tensor_to_half(yf, y);
      }
      return;
    }
    if (t == DType::kBool) {
      run_binary_typed(op_, a.data<uint8_t>(), b.data<uint8_t>(), y.data<uint8_t>(), plan);
      return;
    }
    bool ok = visit_numeric(t, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using O = std::conditional_t<std::is_void_v<BoolOrT>, T, uint8_t>;
      run_binary_typed(op_, a.data<T>(), b.data<T>(), y.data<O>(), plan);
    });
    if (!ok) fail(std::string("input dtype ") + dtype_name(t) + " is not supported");
  }

 private:
  // Before opset 7, B lines up with A at `axis` (default: trailing dims) when broadcast=1.
  Shape b_shape(const Shape& a, const Shape& b) const {
    if (!legacy_) return b;
    if (!legacy_broadcast_) {
      if (a != b)
        fail("input shapes " + shape_str(a) + " and " + shape_str(b) + " differ and attribute broadcast is 0");
      return b;
    }
    int64_t ra = static_cast<int64_t>(a.size()), rb = static_cast<int64_t>(b.size());
    int64_t axis = has_axis_ ? (axis_ < 0 ? axis_ + ra : axis_) : ra - rb;
    if (rb > ra || axis < 0 || axis + rb > ra)
      fail("attribute axis " + std::to_string(axis_) + " cannot place B " + shape_str(b) + " inside A " + shape_str(a));
    Shape s(static_cast<size_t>(ra), 1);
    for (int64_t i = 0; i < rb; ++i) s[static_cast<size_t>(axis + i)] = b[static_cast<size_t>(i)];
    return s;
  }

  Op op_;
  bool unidirectional_;
  bool legacy_ = false, legacy_broadcast_ = false, has_axis_ = false;
  int64_t axis_ = 0;
};

}  // namespace mminfer::kernels
