// MapKernel: the one kernel behind every same-dtype, same-shape unary op (Exp, Relu, Clip ...).
// An op is a small struct:
//   static constexpr bool kInts;            // operator() is meaningful for integer types too
//   static constexpr int64_t kGrain;        // elements per parallel chunk
//   template <typename T> T operator()(T x) const;               // the scalar definition
//   void f32(const float* x, float* y, int64_t n) const;         // optional AVX2 path
// float16/bfloat16 run through the float32 path.
#pragma once
#include <string>
#include <type_traits>

#include "core/parallel.h"
#include "kernels/cpu/common/elementwise_common.h"
#include "kernels/cpu/common/registry.h"

namespace mminfer::kernels {

template <typename Op>
void map_f32(const Op& op, const float* x, float* y, int64_t n) {
  if constexpr (requires { op.f32(x, y, n); }) {
    op.f32(x, y, n);
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = op(x[i]);
  }
}

template <typename Op>
class MapKernel : public Kernel {
 public:
  explicit MapKernel(Op op) : op_(std::move(op)) {}

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "X");
    out[0] = {x.dtype(), x.shape()};
  }
  int inplace_input(int) const override { return 0; }

  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    Tensor& y = *out[0];
    int64_t n = x.numel();
    DType t = x.dtype();
    if (t == DType::kFloat32) {
      const float* xp = x.data<float>();
      float* yp = y.data<float>();
      parallel_for(n, Op::kGrain, [&](int64_t b, int64_t e) { map_f32(op_, xp + b, yp + b, e - b); });
      return;
    }
    if (is_half_type(t)) {
      const uint16_t* xp = x.data<uint16_t>();
      uint16_t* yp = y.data<uint16_t>();
      parallel_for(n, Op::kGrain, [&](int64_t b, int64_t e) {
        map_halfs_via_float(t, xp + b, yp + b, e - b,
                            [&](const float* xs, float* ys, int64_t m) { map_f32(op_, xs, ys, m); });
      });
      return;
    }
    bool done = false;
    visit_numeric(t, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_floating_point_v<T> || Op::kInts) {
        const T* xp = x.data<T>();
        T* yp = y.data<T>();
        parallel_for(n, Op::kGrain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) yp[i] = op_(xp[i]);
        });
        done = true;
      }
    });
    if (!done) fail(std::string("input dtype ") + dtype_name(t) + " is not supported");
  }

 private:
  Op op_;
};

// Registers op `name` for opsets [since, until] with a factory that builds the Op from the spec.
template <typename Op, typename Make>
void add_map(Registry& r, const std::string& name, int since, int until, std::vector<DType> types, Make make) {
  r.add(KernelDef{name, "", since, until, 0, std::move(types),
                  [make](const KernelSpec& s) -> std::unique_ptr<Kernel> {
                    return std::make_unique<MapKernel<Op>>(make(s));
                  }});
}

template <typename Op>
void add_map(Registry& r, const std::string& name, int since, std::vector<DType> types) {
  add_map<Op>(r, name, since, 1000, std::move(types), [](const KernelSpec&) { return Op{}; });
}

// Dtype lists used by the element-wise registrations.
inline std::vector<DType> float_types_bf16() {
  return {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};
}
inline std::vector<DType> signed_numeric_types() {
  return {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
          DType::kInt64,   DType::kInt32,   DType::kInt16,   DType::kInt8};
}
inline std::vector<DType> numeric_types_bf16() {
  std::vector<DType> t = kNumericTypes;
  t.push_back(DType::kBFloat16);
  return t;
}

}  // namespace mminfer::kernels
