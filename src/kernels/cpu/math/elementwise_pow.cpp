// Pow(X, Y): base and exponent may have different dtypes (opset 12+); the output has X's dtype.
// float32 with a constant-like scalar exponent (x^2, x^0.5, ...) takes cheap exact paths.
#include <cmath>
#include <limits>

#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/math/binary_kernel.h"

namespace mminfer::kernels {

namespace {

double load_double(DType t, const void* p, int64_t i) {
  switch (t) {
    case DType::kFloat32: return static_cast<const float*>(p)[i];
    case DType::kFloat64: return static_cast<const double*>(p)[i];
    case DType::kFloat16: return half_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::kBFloat16: return bf16_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::kInt64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case DType::kInt32: return static_cast<const int32_t*>(p)[i];
    case DType::kInt16: return static_cast<const int16_t*>(p)[i];
    case DType::kInt8: return static_cast<const int8_t*>(p)[i];
    case DType::kUint8: return static_cast<const uint8_t*>(p)[i];
    case DType::kUint16: return static_cast<const uint16_t*>(p)[i];
    case DType::kUint32: return static_cast<const uint32_t*>(p)[i];
    case DType::kUint64: return static_cast<double>(static_cast<const uint64_t*>(p)[i]);
    default: return 0;
  }
}

bool is_integer_type(DType t) {
  switch (t) {
    case DType::kInt64: case DType::kInt32: case DType::kInt16: case DType::kInt8:
    case DType::kUint8: case DType::kUint16: case DType::kUint32: case DType::kUint64: return true;
    default: return false;
  }
}

int64_t load_int(DType t, const void* p, int64_t i) {
  if (t == DType::kInt64) return static_cast<const int64_t*>(p)[i];
  if (t == DType::kUint64) return static_cast<int64_t>(static_cast<const uint64_t*>(p)[i]);
  return static_cast<int64_t>(load_double(t, p, i));
}

// Exact integer power with wrap-around, like numpy's integer power; negative exponents give
// 0 except for bases 1 and -1.
int64_t int_pow(int64_t base, int64_t e) {
  if (e < 0) return base == 1 ? 1 : base == -1 ? (e % 2 ? -1 : 1) : 0;
  uint64_t result = 1, b = static_cast<uint64_t>(base);
  while (e) {
    if (e & 1) result *= b;
    b *= b;
    e >>= 1;
  }
  return static_cast<int64_t>(result);
}

// double -> integer without UB for NaN or out-of-range values.
template <typename T>
T saturate_int(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

void store(DType t, void* p, int64_t i, double v, int64_t iv, bool exact_int) {
  switch (t) {
    case DType::kFloat32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::kFloat64: static_cast<double*>(p)[i] = v; break;
    case DType::kFloat16: static_cast<uint16_t*>(p)[i] = float_to_half(static_cast<float>(v)); break;
    case DType::kBFloat16: static_cast<uint16_t*>(p)[i] = float_to_bf16(static_cast<float>(v)); break;
    case DType::kInt64: static_cast<int64_t*>(p)[i] = exact_int ? iv : saturate_int<int64_t>(v); break;
    case DType::kInt32: static_cast<int32_t*>(p)[i] = exact_int ? static_cast<int32_t>(iv) : saturate_int<int32_t>(v); break;
    default: break;
  }
}

// x^e for float32 x and one exponent value, using exact forms for the common small exponents.
void pow_f32_scalar_exponent(const float* x, float* y, int64_t n, float e) {
  if (e == 2.0f) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * x[i];
  } else if (e == 1.0f) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i];
  } else if (e == 3.0f) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * x[i] * x[i];
  } else if (e == 0.5f) {
    for (int64_t i = 0; i < n; ++i) y[i] = std::sqrt(x[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = std::pow(x[i], e);
  }
}

class PowKernel : public Kernel {
 public:
  explicit PowKernel(const KernelSpec& s) : legacy_(s.opset < 7), legacy_broadcast_(s.a().get_int("broadcast", 0) != 0) {}

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "X");
    const Tensor& e = need_input(in, 1, "Y");
    DType xt = x.dtype();
    if (xt != DType::kFloat32 && xt != DType::kFloat64 && xt != DType::kFloat16 && xt != DType::kBFloat16 &&
        xt != DType::kInt32 && xt != DType::kInt64)
      fail(std::string("base dtype ") + dtype_name(xt) + " is not supported");
    if (!is_integer_type(e.dtype()) && e.dtype() != DType::kFloat32 && e.dtype() != DType::kFloat64 &&
        !is_half_type(e.dtype()))
      fail(std::string("exponent dtype ") + dtype_name(e.dtype()) + " is not supported");
    if (legacy_ && !legacy_broadcast_ && x.shape() != e.shape())
      fail("input shapes " + shape_str(x.shape()) + " and " + shape_str(e.shape()) + " differ and attribute broadcast is 0");
    Shape os = legacy_ ? x.shape() : broadcast_shapes({x.shape(), e.shape()});
    if (legacy_ && !broadcasts_to(e.shape(), x.shape()))
      fail("exponent shape " + shape_str(e.shape()) + " does not broadcast to base shape " + shape_str(x.shape()));
    out[0] = {xt, os};
  }

  int inplace_input(int) const override { return 0; }

  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    const Tensor& e = *in[1];
    Tensor& y = *out[0];
    auto plan = make_broadcast_plan<2>({x.shape(), e.shape()}, y.shape());
    DType xt = x.dtype(), et = e.dtype();
    if (xt == DType::kFloat32 && et == DType::kFloat32) {
      const float* xp = x.data<float>();
      const float* ep = e.data<float>();
      float* yp = y.data<float>();
      parallel_for(plan.numel, kGrainTranscendental, [&](int64_t begin, int64_t end) {
        for_each_segment<2>(plan, begin, end, [&](int64_t o, const std::array<int64_t, 2>& off, int64_t len) {
          if (plan.inner[1] == 0 && plan.inner[0] == 1) {
            pow_f32_scalar_exponent(xp + off[0], yp + o, len, ep[off[1]]);
          } else {
            for (int64_t i = 0; i < len; ++i) yp[o + i] = std::pow(xp[off[0] + i * plan.inner[0]], ep[off[1] + i * plan.inner[1]]);
          }
        });
      });
      return;
    }
    bool exact_int = is_integer_type(xt) && is_integer_type(et);
    const void* xp = x.raw();
    const void* ep = e.raw();
    void* yp = y.raw();
    parallel_for(plan.numel, kGrainTranscendental, [&](int64_t begin, int64_t end) {
      for_each_segment<2>(plan, begin, end, [&](int64_t o, const std::array<int64_t, 2>& off, int64_t len) {
        for (int64_t i = 0; i < len; ++i) {
          int64_t xi = off[0] + i * plan.inner[0], ei = off[1] + i * plan.inner[1];
          if (exact_int) {
            store(xt, yp, o + i, 0, int_pow(load_int(xt, xp, xi), load_int(et, ep, ei)), true);
          } else {
            store(xt, yp, o + i, std::pow(load_double(xt, xp, xi), load_double(et, ep, ei)), 0, false);
          }
        }
      });
    });
  }

 private:
  bool legacy_, legacy_broadcast_;
};

}  // namespace

void register_elementwise_pow(Registry& r) {
  r.add(KernelDef{"Pow", "", 1, 1000, 0, {}, [](const KernelSpec& s) -> std::unique_ptr<Kernel> {
                    return std::make_unique<PowKernel>(s);
                  }});
}

}  // namespace mminfer::kernels
