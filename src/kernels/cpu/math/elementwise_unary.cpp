// Unary math: Abs, Neg, Sign, Exp, Log, Sqrt, Reciprocal, Floor, Ceil, Round, trigonometric and
// hyperbolic functions, Erf, Not, BitwiseNot, IsNaN, IsInf.
#include <cmath>
#include <limits>

#include "kernels/cpu/common/vector_math.h"
#include "kernels/cpu/math/map_kernel.h"

namespace mminfer::kernels {

namespace {

using vmath::map_avx2;

// Integer negation and absolute value wrap like two's complement instead of overflowing (UB).
template <typename T>
T wrapping_neg(T x) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(U(0) - static_cast<U>(x));
}

struct AbsOp {
  static constexpr bool kInts = true;
  static constexpr int64_t kGrain = kGrainCheap;
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return std::fabs(x);
    else if constexpr (std::is_unsigned_v<T>) return x;
    else return x < 0 ? wrapping_neg(x) : x;
  }
  void f32(const float* x, float* y, int64_t n) const {
    map_avx2(x, y, n, [](__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); });
  }
};

struct NegOp {
  static constexpr bool kInts = true;
  static constexpr int64_t kGrain = kGrainCheap;
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return -x;
    else return wrapping_neg(x);
  }
  void f32(const float* x, float* y, int64_t n) const {
    map_avx2(x, y, n, [](__m256 v) { return _mm256_xor_ps(_mm256_set1_ps(-0.0f), v); });
  }
};

struct SignOp {
  static constexpr bool kInts = true;
  static constexpr int64_t kGrain = kGrainCheap;
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(x)) return x;
    }
    return x > T(0) ? T(1) : (x < T(0) ? static_cast<T>(-1) : T(0));
  }
};

// Float-only functions defined by one std:: call.
#define MMINFER_FLOAT_OP(NAME, EXPR)                     \
  struct NAME {                                          \
    static constexpr bool kInts = false;                 \
    static constexpr int64_t kGrain = kGrainTranscendental; \
    template <typename T>                                \
    T operator()(T x) const {                            \
      return EXPR;                                       \
    }                                                    \
  };
MMINFER_FLOAT_OP(LogOp, std::log(x))
MMINFER_FLOAT_OP(SinOp, std::sin(x))
MMINFER_FLOAT_OP(CosOp, std::cos(x))
MMINFER_FLOAT_OP(TanOp, std::tan(x))
MMINFER_FLOAT_OP(AsinOp, std::asin(x))
MMINFER_FLOAT_OP(AcosOp, std::acos(x))
MMINFER_FLOAT_OP(AtanOp, std::atan(x))
MMINFER_FLOAT_OP(SinhOp, std::sinh(x))
MMINFER_FLOAT_OP(CoshOp, std::cosh(x))
MMINFER_FLOAT_OP(AsinhOp, std::asinh(x))
MMINFER_FLOAT_OP(AcoshOp, std::acosh(x))
MMINFER_FLOAT_OP(AtanhOp, std::atanh(x))
#undef MMINFER_FLOAT_OP

struct ExpOp {
  static constexpr bool kInts = false;
  static constexpr int64_t kGrain = kGrainTranscendental;
  template <typename T>
  T operator()(T x) const { return std::exp(x); }
  void f32(const float* x, float* y, int64_t n) const { map_avx2(x, y, n, vmath::exp_avx2); }
};

struct TanhOp {
  static constexpr bool kInts = false;
  static constexpr int64_t kGrain = kGrainTranscendental;
  template <typename T>
  T operator()(T x) const { return std::tanh(x); }
  void f32(const float* x, float* y, int64_t n) const { map_avx2(x, y, n, vmath::tanh_avx2); }
};

struct ErfOp {
  static constexpr bool kInts = false;
  static constexpr int64_t kGrain = kGrainTranscendental;
  template <typename T>
  T operator()(T x) const { return std::erf(x); }
  void f32(const float* x, float* y, int64_t n) const { map_avx2(x, y, n, vmath::erf_avx2); }
};

struct SqrtOp {
  static constexpr bool kInts = false;
  static constexpr int64_t kGrain = kGrainCheap;
  template <typename T>
  T operator()(T x) const { return std::sqrt(x); }
  void f32(const float* x, float* y, int64_t n) const { map_avx2(x, y, n, [](__m256 v) { return _mm256_sqrt_ps(v); }); }
};

struct ReciprocalOp {
  static constexpr bool kInts = false;
  static constexpr int64_t kGrain = kGrainCheap;
  template <typename T>
  T operator()(T x) const { return T(1) / x; }
  void f32(const float* x, float* y, int64_t n) const {
    map_avx2(x, y, n, [](__m256 v) { return _mm256_div_ps(_mm256_set1_ps(1.0f), v); });
  }
};

template <int kMode>
struct RoundingOp {  // kMode: an _MM_FROUND_* direction; nearest means half to even
  static constexpr bool kInts = false;
  static constexpr int64_t kGrain = kGrainCheap;
  template <typename T>
  T operator()(T x) const {
    if constexpr (kMode == _MM_FROUND_TO_NEG_INF) return std::floor(x);
    else if constexpr (kMode == _MM_FROUND_TO_POS_INF) return std::ceil(x);
    else return std::nearbyint(x);  // default rounding mode: to nearest, ties to even
  }
  void f32(const float* x, float* y, int64_t n) const {
    map_avx2(x, y, n, [](__m256 v) { return _mm256_round_ps(v, kMode | _MM_FROUND_NO_EXC); });
  }
};

struct BitwiseNotOp {
  static constexpr bool kInts = true;
  static constexpr int64_t kGrain = kGrainCheap;
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(~x);
    else return x;  // never registered for floats
  }
};

// bool -> bool negation; bool storage is one byte holding 0 or 1.
class NotKernel : public Kernel {
 public:
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "X");
    if (x.dtype() != DType::kBool) fail(std::string("input X must be bool, got ") + dtype_name(x.dtype()));
    out[0] = {DType::kBool, x.shape()};
  }
  int inplace_input(int) const override { return 0; }
  void run(const Inputs& in, Outputs& out) override {
    const uint8_t* x = in[0]->data<uint8_t>();
    uint8_t* y = out[0]->data<uint8_t>();
    parallel_for(in[0]->numel(), kGrainCheap, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) y[i] = x[i] ? 0 : 1;
    });
  }
};

// IsNaN / IsInf: float input, bool output.
class FloatPredicateKernel : public Kernel {
 public:
  enum class Kind { kNaN, kInf };
  FloatPredicateKernel(Kind kind, bool pos, bool neg) : kind_(kind), pos_(pos), neg_(neg) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "X");
    out[0] = {DType::kBool, x.shape()};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    uint8_t* y = out[0]->data<uint8_t>();
    int64_t n = x.numel();
    auto test = [&](double v) -> uint8_t {
      if (kind_ == Kind::kNaN) return std::isnan(v);
      return std::isinf(v) && ((v > 0 && pos_) || (v < 0 && neg_));
    };
    switch (x.dtype()) {
      case DType::kFloat32: for (int64_t i = 0; i < n; ++i) y[i] = test(x.data<float>()[i]); break;
      case DType::kFloat64: for (int64_t i = 0; i < n; ++i) y[i] = test(x.data<double>()[i]); break;
      case DType::kFloat16: for (int64_t i = 0; i < n; ++i) y[i] = test(half_to_float(x.data<uint16_t>()[i])); break;
      case DType::kBFloat16: for (int64_t i = 0; i < n; ++i) y[i] = test(bf16_to_float(x.data<uint16_t>()[i])); break;
      default: fail(std::string("input X dtype ") + dtype_name(x.dtype()) + " is not supported");
    }
  }

 private:
  Kind kind_;
  bool pos_, neg_;
};

std::vector<DType> int_types() {
  return {DType::kInt64, DType::kInt32, DType::kInt16, DType::kInt8,
          DType::kUint8, DType::kUint16, DType::kUint32, DType::kUint64};
}

}  // namespace

void register_elementwise_unary(Registry& r) {
  auto fl = float_types_bf16();
  add_map<AbsOp>(r, "Abs", 1, numeric_types_bf16());
  add_map<NegOp>(r, "Neg", 1, signed_numeric_types());
  add_map<SignOp>(r, "Sign", 9, numeric_types_bf16());
  add_map<ExpOp>(r, "Exp", 1, fl);
  add_map<LogOp>(r, "Log", 1, fl);
  add_map<SqrtOp>(r, "Sqrt", 1, fl);
  add_map<ReciprocalOp>(r, "Reciprocal", 1, fl);
  add_map<RoundingOp<_MM_FROUND_TO_NEG_INF>>(r, "Floor", 1, fl);
  add_map<RoundingOp<_MM_FROUND_TO_POS_INF>>(r, "Ceil", 1, fl);
  add_map<RoundingOp<_MM_FROUND_TO_NEAREST_INT>>(r, "Round", 11, fl);
  add_map<SinOp>(r, "Sin", 7, fl);
  add_map<CosOp>(r, "Cos", 7, fl);
  add_map<TanOp>(r, "Tan", 7, fl);
  add_map<AsinOp>(r, "Asin", 7, fl);
  add_map<AcosOp>(r, "Acos", 7, fl);
  add_map<AtanOp>(r, "Atan", 7, fl);
  add_map<SinhOp>(r, "Sinh", 9, fl);
  add_map<CoshOp>(r, "Cosh", 9, fl);
  add_map<TanhOp>(r, "Tanh", 1, fl);
  add_map<AsinhOp>(r, "Asinh", 9, fl);
  add_map<AcoshOp>(r, "Acosh", 9, fl);
  add_map<AtanhOp>(r, "Atanh", 9, fl);
  add_map<ErfOp>(r, "Erf", 9, fl);
  add_map<BitwiseNotOp>(r, "BitwiseNot", 18, int_types());
  r.add(KernelDef{"Not", "", 1, 1000, 0, {DType::kBool},
                  [](const KernelSpec&) -> std::unique_ptr<Kernel> { return std::make_unique<NotKernel>(); }});
  r.add(KernelDef{"IsNaN", "", 9, 1000, 0, float_types_bf16(), [](const KernelSpec&) -> std::unique_ptr<Kernel> {
                    return std::make_unique<FloatPredicateKernel>(FloatPredicateKernel::Kind::kNaN, true, true);
                  }});
  r.add(KernelDef{"IsInf", "", 10, 1000, 0, float_types_bf16(), [](const KernelSpec& s) -> std::unique_ptr<Kernel> {
                    return std::make_unique<FloatPredicateKernel>(FloatPredicateKernel::Kind::kInf,
                                                                  s.a().get_int("detect_positive", 1) != 0,
                                                                  s.a().get_int("detect_negative", 1) != 0);
                  }});
}

}  // namespace mminfer::kernels
