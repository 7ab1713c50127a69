#include "kernels/cpu/nn/kv_rows.h"

#include <immintrin.h>

#include <cstring>

#include "core/half.h"
#include "core/int8_rows.h"

namespace mminfer::kernels {

KvRows kv_rows(const Tensor& cache, int64_t dim, int64_t heads, const int32_t* table, int64_t table_width) {
  KvRows r;
  r.base = static_cast<char*>(const_cast<void*>(cache.raw()));
  r.row_bytes = cache.dtype() == DType::kInt8 ? int8_rows::bytes(dim) : dim * int64_t(dtype_size(cache.dtype()));
  r.heads = heads, r.block = cache.dim(2), r.table = table, r.table_width = table ? table_width : 1;
  return r;
}

void KvReader::point(cached_attention::Rows& p, int64_t b, int64_t h, int64_t n) {
  if (b != at_b_ || h != at_h_ || n != at_n_) {
    view_ = {};
    if (dtype_ == DType::kFloat16) {
      view_.k = widen_rows(keys_, b, h, n, dk_, wide_k_), view_.kv_stride = dk_;
      view_.v = widen_rows(values_, b, h, n, dv_, wide_v_), view_.kv_stride_v = dv_;
    } else {  // in place; int8 codes are widened in registers as attention reads them
      const bool int8 = dtype_ == DType::kInt8;
      view_.kv_stride = int8 ? keys_.row_bytes : dk_, view_.kv_stride_v = int8 ? values_.row_bytes : dv_;
      keys_.block_starts(b, h, n, k_starts_), values_.block_starts(b, h, n, v_starts_);
      if (!k_starts_.empty()) {
        view_.k_blocks = k_starts_.data(), view_.v_blocks = v_starts_.data(), view_.block = keys_.block, view_.blocks_int8 = int8;
      } else if (int8) {
        view_.k8 = reinterpret_cast<const int8_t*>(keys_.row(b, h, 0)), view_.v8 = reinterpret_cast<const int8_t*>(values_.row(b, h, 0));
      } else {
        view_.k = reinterpret_cast<const float*>(keys_.row(b, h, 0)), view_.v = reinterpret_cast<const float*>(values_.row(b, h, 0));
      }
    }
    at_b_ = b, at_h_ = h, at_n_ = n;
  }
  p.k = view_.k, p.v = view_.v, p.k8 = view_.k8, p.v8 = view_.v8;
  p.k_blocks = view_.k_blocks, p.v_blocks = view_.v_blocks, p.block = view_.block, p.blocks_int8 = view_.blocks_int8;
  p.kv_stride = view_.kv_stride, p.kv_stride_v = view_.kv_stride_v;
}

void store_row(char* row, const float* x, int64_t dim, DType dtype) {
  if (dtype == DType::kInt8) {
    int8_rows::quantize(x, dim, reinterpret_cast<int8_t*>(row));
  } else if (dtype == DType::kFloat16) {
    uint16_t* h = reinterpret_cast<uint16_t*>(row);
    for (int64_t i = 0; i < dim; ++i) h[i] = float_to_half(x[i]);
  } else {
    std::memcpy(row, x, sizeof(float) * dim);
  }
}

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
