// Cast and CastLike between every numeric dtype, bool, float16 and bfloat16. Float to integer
// truncates toward zero (NaN gives 0, out-of-range values saturate instead of invoking UB);
// anything to bool is `x != 0`. String casts are not supported.
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <variant>

#include "core/parallel.h"
#include "kernels/cpu/common/elementwise_common.h"
#include "kernels/cpu/common/registry.h"

namespace mminfer::kernels {

namespace {

template <typename D, typename S>
D convert(S s) {
  if constexpr (std::is_integral_v<D> && std::is_floating_point_v<S>) {
    if (std::isnan(s)) return 0;
    if (s <= static_cast<S>(std::numeric_limits<D>::lowest())) return std::numeric_limits<D>::lowest();
    if (s >= static_cast<S>(std::numeric_limits<D>::max())) return std::numeric_limits<D>::max();
    return static_cast<D>(s);
  } else {
    return static_cast<D>(s);
  }
}

template <typename S, typename D>
void cast_array(const S* s, D* d, int64_t n, bool to_bool) {
  if (to_bool) {
    for (int64_t i = 0; i < n; ++i) d[i] = s[i] != S(0);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = convert<D>(s[i]);
  }
}

// Storage type of plain dtypes (bool is one byte); false for float16/bfloat16/strings.
template <typename Fn>
bool visit_storage(DType t, Fn&& fn) {
  if (t == DType::kBool) {
    fn(TypeTag<uint8_t>{});
    return true;
  }
  return visit_numeric(t, fn);
}

bool castable(DType t) { return t == DType::kBool || is_half_type(t) || (dtype_size(t) > 0 && t != DType::kString); }

// Converts n elements from src (dtype st) to dst (dtype dt); float16/bfloat16 go via float32.
void cast_block(DType st, const void* src, DType dt, void* dst, int64_t n) {
  bool to_bool = dt == DType::kBool;
  if (is_half_type(st) || is_half_type(dt)) {
    constexpr int64_t kChunk = 1024;
    alignas(32) float buf[kChunk];
    for (int64_t i = 0; i < n; i += kChunk) {
      int64_t m = std::min(kChunk, n - i);
      if (is_half_type(st)) {
        halfs_to_float(st, static_cast<const uint16_t*>(src) + i, buf, m);
      } else {
        visit_storage(st, [&](auto tag) {
          using S = typename decltype(tag)::type;
          cast_array(static_cast<const S*>(src) + i, buf, m, false);
        });
      }
      if (is_half_type(dt)) {
        float_to_halfs(dt, buf, static_cast<uint16_t*>(dst) + i, m);
      } else {
        visit_storage(dt, [&](auto tag) {
          using D = typename decltype(tag)::type;
          cast_array(static_cast<const float*>(buf), static_cast<D*>(dst) + i, m, to_bool);
        });
      }
    }
    return;
  }
  visit_storage(st, [&](auto stag) {
    using S = typename decltype(stag)::type;
    visit_storage(dt, [&](auto dtag) {
      using D = typename decltype(dtag)::type;
      cast_array(static_cast<const S*>(src), static_cast<D*>(dst), n, to_bool);
    });
  });
}

class CastKernel : public Kernel {
 public:
  // to == kUndefined: take the dtype of input 1 (CastLike).
  explicit CastKernel(DType to) : to_(to) {}

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "input");
    DType to = to_;
    if (to == DType::kUndefined) to = need_input(in, 1, "target_type").dtype();
    if (!castable(x.dtype())) fail(std::string("cast from ") + dtype_name(x.dtype()) + " is not supported");
    if (!castable(to)) fail(std::string("cast to ") + dtype_name(to) + " is not supported");
    out[0] = {to, x.shape()};
  }

  int inplace_input(int) const override { return 0; }  // used only when the byte sizes match

  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    Tensor& y = *out[0];
    DType st = x.dtype(), dt = y.dtype();
    int64_t n = x.numel();
    if (st == dt) {
      if (x.raw() != y.raw()) std::memcpy(y.raw(), x.raw(), x.nbytes());
      return;
    }
    size_t ss = dtype_size(st), ds = dtype_size(dt);
    // In place with equal element sizes is safe: each element is read before it is written.
    const char* sp = static_cast<const char*>(x.raw());
    char* dp = static_cast<char*>(y.raw());
    parallel_for(n, kGrainCheap, [&](int64_t b, int64_t e) {
      cast_block(st, sp + static_cast<size_t>(b) * ss, dt, dp + static_cast<size_t>(b) * ds, e - b);
    });
  }

 private:
  DType to_;
};

DType dtype_from_onnx(int64_t v) {
  DType t = static_cast<DType>(v);
  if (v == 8) fail("cast to string is not supported");
  if (v < 1 || v > 16 || dtype_size(t) == 0) fail("cast to ONNX data type " + std::to_string(v) + " is not supported");
  return t;
}

}  // namespace

void register_cast(Registry& r) {
  r.add(KernelDef{"Cast", "", 1, 1000, 0, {}, [](const KernelSpec& s) -> std::unique_ptr<Kernel> {
                    if (!s.a().has("to")) fail("attribute 'to' is required");
                    // Opset 1-5 spelled `to` as a type name string.
                    DType to;
                    if (s.opset < 6 && s.a().has("to") && std::holds_alternative<std::string>(s.a().all().at("to"))) {
                      std::string name = s.a().get_string("to", "");
                      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
                      if (name == "float") name = "float32";
                      if (name == "double") name = "float64";
                      to = dtype_from_name(name);
                      if (to == DType::kUndefined || to == DType::kString) fail("cast to '" + name + "' is not supported");
                    } else {
                      to = dtype_from_onnx(s.a().get_int("to", 0));
                    }
                    if (!s.input_dtypes.empty() && s.input_dtypes[0] == DType::kString)
                      fail("cast from string is not supported");
                    return std::make_unique<CastKernel>(to);
                  }});
  r.add(KernelDef{"CastLike", "", 15, 1000, 0, {}, [](const KernelSpec& s) -> std::unique_ptr<Kernel> {
                    if (s.input_dtypes.size() > 1 && s.input_dtypes[1] == DType::kString)
                      fail("cast to string is not supported");
                    if (!s.input_dtypes.empty() && s.input_dtypes[0] == DType::kString)
                      fail("cast from string is not supported");
                    return std::make_unique<CastKernel>(DType::kUndefined);
                  }});
}

}  // namespace mminfer::kernels
