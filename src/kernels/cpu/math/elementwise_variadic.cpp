// Sum, Mean, Max, Min over 1..N inputs with numpy broadcasting. The output is folded in
// place: out = in0 (op) in1, then out = out (op) in_k for each further input.
#include <cstring>

#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/math/binary_kernel.h"
#include "kernels/cpu/math/map_kernel.h"

namespace mminfer::kernels {

namespace {

struct First {  // copies the first operand; used to broadcast a single input into the output
  static constexpr bool kBoolOut = false;
  template <typename T>
  T operator()(T a, T) const { return a; }
};

template <typename Op>
class VariadicKernel : public Kernel {
 public:
  explicit VariadicKernel(bool mean) : mean_(mean) {}

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    if (in.empty()) fail("needs at least one input");
    std::vector<Shape> shapes;
    DType t = need_input(in, 0, "data_0").dtype();
    for (size_t i = 0; i < in.size(); ++i) {
      const Tensor& x = need_input(in, i, "data");
      if (x.dtype() != t)
        fail("input " + std::to_string(i) + " has dtype " + dtype_name(x.dtype()) + ", input 0 has " + dtype_name(t));
      shapes.push_back(x.shape());
    }
    out[0] = {t, broadcast_shapes(shapes)};
  }

  int inplace_input(int) const override { return 0; }

  void run(const Inputs& in, Outputs& out) override {
    Tensor& y = *out[0];
    DType t = y.dtype();
    if (is_half_type(t)) {
      std::vector<Tensor> fl;
      for (const Tensor* x : in) fl.push_back(half_tensor_to_float(*x));
      Tensor yf = Tensor::empty(DType::kFloat32, y.shape());
      fold<float>(in.size(), [&](size_t i) { return &fl[i]; }, yf);
      float_tensor_to_half(yf, y);
      return;
    }
    bool ok = visit_numeric(t, [&](auto tag) {
      using T = typename decltype(tag)::type;
      fold<T>(in.size(), [&](size_t i) { return in[i]; }, y);
    });
    if (!ok) fail(std::string("input dtype ") + dtype_name(t) + " is not supported");
  }

 private:
  template <typename T, typename Get>
  void fold(size_t n, Get get, Tensor& y) {
    T* yp = y.data<T>();
    if (n == 1) {
      const Tensor& x = *get(0);
      if (x.raw() != y.raw()) {
        auto plan = make_broadcast_plan<2>({x.shape(), x.shape()}, y.shape());
        run_binary_typed(First{}, x.data<T>(), x.data<T>(), yp, plan);
      }
    } else {
      const Tensor &a = *get(0), &b = *get(1);
      run_binary_typed(Op{}, a.data<T>(), b.data<T>(), yp, make_broadcast_plan<2>({a.shape(), b.shape()}, y.shape()));
      for (size_t i = 2; i < n; ++i) {
        const Tensor& x = *get(i);
        run_binary_typed(Op{}, static_cast<const T*>(yp), x.data<T>(), yp,
                         make_broadcast_plan<2>({y.shape(), x.shape()}, y.shape()));
      }
    }
    if constexpr (std::is_floating_point_v<T>) {
      if (mean_) {
        T count = static_cast<T>(n);
        int64_t m = y.numel();
        parallel_for(m, kGrainCheap, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) yp[i] /= count;
        });
      }
    }
  }

  bool mean_;
};

template <typename Op>
void add_variadic(Registry& r, const std::string& name, int since, std::vector<DType> types, bool mean = false) {
  r.add(KernelDef{name, "", since, 1000, 0, std::move(types), [mean](const KernelSpec&) -> std::unique_ptr<Kernel> {
                    return std::make_unique<VariadicKernel<Op>>(mean);
                  }});
}

}  // namespace

void register_elementwise_variadic(Registry& r) {
  add_variadic<binop::Add>(r, "Sum", 1, float_types_bf16());
  add_variadic<binop::Add>(r, "Mean", 1, float_types_bf16(), true);
  // Max/Min take integer types from opset 12.
  add_variadic<binop::Max>(r, "Max", 1, numeric_types_bf16());
  add_variadic<binop::Min>(r, "Min", 1, numeric_types_bf16());
}

}  // namespace mminfer::kernels
