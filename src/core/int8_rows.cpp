#include "core/int8_rows.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mminfer::int8_rows {

void quantize(const float* x, int64_t dim, int8_t* row) {
  float amax = 0.f;
  bool finite = true;
  for (int64_t i = 0; i < dim; ++i) {
    finite = finite && std::isfinite(x[i]);
    amax = std::max(amax, std::fabs(x[i]));
  }
  float scale = finite ? amax / 127.f : std::numeric_limits<float>::quiet_NaN();
  if (!finite || amax == 0.f) {
    std::fill_n(row, dim, int8_t{0});
  } else {
    const float inv = 127.f / amax;
    for (int64_t i = 0; i < dim; ++i)
      row[i] = static_cast<int8_t>(std::clamp(std::nearbyint(x[i] * inv), -127.f, 127.f));
  }
  std::memcpy(row + dim, &scale, sizeof scale);
}

void dequantize(const int8_t* row, int64_t dim, float* out) {
  const float scale = scale_of(row, dim);
  for (int64_t i = 0; i < dim; ++i) out[i] = static_cast<float>(row[i]) * scale;
}

}  // namespace mminfer::int8_rows
