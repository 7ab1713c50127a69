// Dynamic asymmetric uint8 quantization of float activations, per row (token) or per tensor:
//   scale = (hi - lo) / 255 over the row's [lo, hi] widened to hold 0,
//   zero_point = round(-lo / scale), q = clamp(round(x / scale) + zero_point, 0, 255),
// so x ≈ (q - zero_point) * scale and 0 is exact. A row (or tensor) holding NaN or ±inf gets
// a NaN scale, so whatever is computed from it comes out NaN rather than quietly finite.
// Ranges below kMinQuantScale * 255 read as zeros (their products would be below anything a
// float32 GEMM keeps beside normal-sized values anyway).
#pragma once
#include <cstdint>

namespace mminfer::kernels {

constexpr float kMinQuantScale = 1e-30f;

struct QuantizedRows {
  uint8_t* q;          // rows x cols, row-major
  float* scale;        // one per row (all equal when per tensor)
  int32_t* zero_point;  // one per row
};

// A calibrated (static) range: the same formulas over [lo, hi] widened to hold 0, no pass over
// the data to measure it; values outside saturate, and NaN or ±inf go unseen (NaN lands on
// quantized 0, ±inf on the ends).
struct StaticRange {
  float lo, hi;
};

// The grid of one range [lo, hi] (NaN/inf seen: `bad`), by the formulas above; what the
// quantizers of whole tensors (Int8Conv) share with the row quantizer.
struct QuantGrid {
  float scale, inv;
  int32_t zero_point;
};
QuantGrid quant_grid(float lo, float hi, bool bad);
// [lo, hi] of n values widened to hold 0, multi-threaded; `bad` when NaN or ±inf is among them.
struct ValueRange {
  float lo = 0.f, hi = 0.f;
  bool bad = false;
};
ValueRange value_range(const float* x, int64_t n);
ValueRange value_range_reference(const float* x, int64_t n);
// q[i] = clamp(round(x[i] · inv) + zero_point, 0, 255), multi-threaded; NaN lands on 0.
void quantize_values_u8(const float* x, int64_t n, const QuantGrid& grid, uint8_t* q);
uint8_t quantize_value_u8(float x, const QuantGrid& grid);  // the scalar twin of one value

// Multi-threaded over rows; AVX2, min/max and quantization in one sweep of each cache-hot row.
// With `fixed`, the whole tensor takes that range (per_tensor is then implied).
void quantize_u8(const float* x, int64_t rows, int64_t cols, bool per_tensor, const QuantizedRows& out,
                 const StaticRange* fixed = nullptr);
// The plain scalar twin (same formulas, same rounding): the tests' reference.
void quantize_u8_reference(const float* x, int64_t rows, int64_t cols, bool per_tensor, const QuantizedRows& out,
                           const StaticRange* fixed = nullptr);

}  // namespace mminfer::kernels
