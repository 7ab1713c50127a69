// Calls a generic lambda with the storage and compute types of a runtime dtype, so kernels
// that do arithmetic or comparisons (TopK, Unique, CumSum, Scatter reductions) are written once.
// float16 and bfloat16 are stored as uint16_t and computed in float.
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>

#include "core/half.h"
#include "kernels/cpu/common/kernel.h"

namespace mminfer::kernels {

template <typename S, typename C = S>
struct Num {
  using Storage = S;
  using Compute = C;
  static C load(S v) { return static_cast<C>(v); }
  static S store(C v) { return static_cast<S>(v); }
};

struct NumHalf {
  using Storage = uint16_t;
  using Compute = float;
  static float load(uint16_t v) { return half_to_float(v); }
  static uint16_t store(float v) { return float_to_half(v); }
};

struct NumBf16 {
  using Storage = uint16_t;
  using Compute = float;
  static float load(uint16_t v) { return bf16_to_float(v); }
  static uint16_t store(float v) { return float_to_bf16(v); }
};

// fn receives a Num-like tag object; `what` names the tensor in the error for other dtypes.
template <typename Fn>
decltype(auto) visit_numeric(DType t, const char* what, Fn&& fn) {
  switch (t) {
    case DType::kFloat32: return fn(Num<float>{});
    case DType::kFloat64: return fn(Num<double>{});
    case DType::kFloat16: return fn(NumHalf{});
    case DType::kBFloat16: return fn(NumBf16{});
    case DType::kInt64: return fn(Num<int64_t>{});
    case DType::kInt32: return fn(Num<int32_t>{});
    case DType::kInt16: return fn(Num<int16_t>{});
    case DType::kInt8: return fn(Num<int8_t>{});
    case DType::kUint8: return fn(Num<uint8_t>{});
    case DType::kUint16: return fn(Num<uint16_t>{});
    case DType::kUint32: return fn(Num<uint32_t>{});
    case DType::kUint64: return fn(Num<uint64_t>{});
    case DType::kBool: return fn(Num<bool>{});
    default: fail(std::string(what) + " has unsupported dtype " + dtype_name(t));
  }
}

// Writes `value` converted to dtype `t` into the element at `dst`.
// Floating dtypes only (the storage/compute pair for float32/64, float16, bfloat16).
template <typename Fn>
void visit_float_type(DType t, const char* what, Fn&& fn) {
  switch (t) {
    case DType::kFloat32: fn(Num<float>{}); break;
    case DType::kFloat64: fn(Num<double>{}); break;
    case DType::kFloat16: fn(NumHalf{}); break;
    case DType::kBFloat16: fn(NumBf16{}); break;
    default: fail(std::string(what) + " has unsupported dtype " + dtype_name(t));
  }
}

inline void store_scalar(DType t, void* dst, double value) {
  visit_numeric(t, "value", [&](auto tag) {
    using N = decltype(tag);
    using C = typename N::Compute;
    *static_cast<typename N::Storage*>(dst) = N::store(static_cast<C>(value));
  });
}

}  // namespace mminfer::kernels
