#include "kernels/cpu/nn/kv_rows.h"

#include <immintrin.h>

namespace mminfer::kernels {

const float* widen_rows(const KvRows& rows, int64_t b, int64_t h, int64_t n, int64_t dim, std::vector<float>& buffer) {
  buffer.resize(static_cast<size_t>(n * dim + 8));
  float* f = buffer.data();
  f += (32 - reinterpret_cast<uintptr_t>(f) % 32) % 32 / sizeof(float);
  rows.for_each_run(b, h, n, [&](const char* run, int64_t first, int64_t count) {
    const uint16_t* from = reinterpret_cast<const uint16_t*>(run);
    float* to = f + first * dim;
    const int64_t m = count * dim;
    int64_t i = 0;  // F16C is in the build's baseline
    for (; i + 8 <= m; i += 8) _mm256_storeu_ps(to + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i))));
    for (; i < m; ++i) to[i] = _cvtsh_ss(from[i]);
  });
  return f;
}

}  // namespace mminfer::kernels
