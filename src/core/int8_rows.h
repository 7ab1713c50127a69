// The rows of an INT8 KV cache: each key or value vector of one (sequence, KV head, position) is
// `dim` int8 codes followed by its own float32 scale (symmetric, amax / 127), so x[i] ≈ code[i] *
// scale. A scale per row means appending a position never rescales the ones before it, and a row
// moved (beam reordering) carries its scale with it. The cache's tensors are int8 [.., dim + 4].
#pragma once
#include <cstdint>
#include <cstring>

namespace mminfer::int8_rows {

constexpr int64_t kScaleBytes = 4;
constexpr int64_t bytes(int64_t dim) { return dim + kScaleBytes; }

inline float scale_of(const int8_t* row, int64_t dim) {
  float s;
  std::memcpy(&s, row + dim, sizeof s);
  return s;
}

// Codes and scale of x[0, dim). A row that is not finite gets a NaN scale (attention over it is
// NaN, as it would be in float32); an all-zero row gets scale 0.
void quantize(const float* x, int64_t dim, int8_t* row);
// out[i] = code[i] * scale.
void dequantize(const int8_t* row, int64_t dim, float* out);

}  // namespace mminfer::int8_rows
