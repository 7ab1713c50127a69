// Attention over a contiguous K/V cache, rows that share their keys together (see cached_attention.h).
#include "kernels/cpu/nn/cached_attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/cpu_features.h"
#include "core/int8_rows.h"
#include "kernels/cpu/common/vector_math.h"
#include "kernels/cpu/nn/cached_attention_loops.h"

namespace mminfer::kernels::cached_attention {

namespace {

// The twin of each loop this CPU runs (cpu_features(), capped by MMINFER_ISA), chosen once.
struct Loops {
  decltype(&int8_scores_avx2) int8_scores;
  decltype(&int8_accumulate_avx2) int8_accumulate;
  decltype(&group_scores_avx2) group_scores;
  decltype(&group_values_avx2) group_values;
};
const Loops& loops() {
  static const Loops chosen = cpu_features().avx512f
                                  ? Loops{int8_scores_avx512, int8_accumulate_avx512, group_scores_avx512, group_values_avx512}
                                  : Loops{int8_scores_avx2, int8_accumulate_avx2, group_scores_avx2, group_values_avx2};
  return chosen;
}

float sink_of(const Rows& p, int64_t i) { return p.sinks ? p.sinks[i] : p.sink; }

// Logits -> probabilities in place. A NaN logit makes the row NaN, as a plain softmax would.
void softmax(float* s, int64_t n, bool has_sink, float sink) {
  float m = has_sink ? sink : -std::numeric_limits<float>::infinity();
  bool nan = false;
  for (int64_t j = 0; j < n; ++j) {
    nan = nan || std::isnan(s[j]);
    m = std::max(m, s[j]);
  }
  if (nan) {
    std::fill_n(s, n, std::numeric_limits<float>::quiet_NaN());
    return;
  }
  if (m == -std::numeric_limits<float>::infinity()) {  // every key masked: a tie, as Softmax gives
    std::fill_n(s, n, 1.f / static_cast<float>(n));
    return;
  }
  const __m256 vm = _mm256_set1_ps(m);
  vmath::map_avx2(s, s, n, [&](__m256 x) { return vmath::exp_avx2(_mm256_sub_ps(x, vm)); });
  float sum = has_sink ? vmath::exp_scalar(sink - m) : 0.f;
  for (int64_t j = 0; j < n; ++j) sum += s[j];
  const __m256 inv = _mm256_set1_ps(1.f / sum);
  vmath::map_avx2(s, s, n, [&](__m256 x) { return _mm256_mul_ps(x, inv); });
}

// Scale, soft cap and bias applied to row i's raw scores s[0, hi - lo).
void finish_logits(const Rows& p, int64_t i, int64_t lo, int64_t hi, float* s) {
  const __m256 vs = _mm256_set1_ps(p.scale);
  vmath::map_avx2(s, s, hi - lo, [&](__m256 x) { return _mm256_mul_ps(x, vs); });
  if (p.softcap > 0.f) {
    const __m256 c = _mm256_set1_ps(p.softcap), ic = _mm256_set1_ps(1.f / p.softcap);
    vmath::map_avx2(s, s, hi - lo, [&](__m256 x) { return _mm256_mul_ps(c, vmath::tanh_avx2(_mm256_mul_ps(x, ic))); });
  }
  if (p.bias) {
    const float* b = p.bias + i * p.bias_stride;
    for (int64_t j = lo; j < hi; ++j) s[j - lo] += b[j];
  }
}

bool int8_cache(const Rows& p) { return p.k_blocks ? p.blocks_int8 : p.k8 != nullptr; }

// Calls fn(j, count, keys, values) for the runs of keys [lo, hi) that lie one after another:
// the whole range in a contiguous cache, a block's share of it in a paged one.
template <class Fn>
void for_each_run(const Rows& p, int64_t lo, int64_t hi, Fn&& fn) {
  const int64_t element = int8_cache(p) ? 1 : int64_t(sizeof(float));
  if (!p.k_blocks) {
    const char* k = p.k8 ? reinterpret_cast<const char*>(p.k8) : reinterpret_cast<const char*>(p.k);
    const char* v = p.v8 ? reinterpret_cast<const char*>(p.v8) : reinterpret_cast<const char*>(p.v);
    return fn(lo, hi - lo, k + lo * p.kv_stride * element, v + lo * p.kv_stride_v * element);
  }
  for (int64_t j = lo; j < hi;) {
    const int64_t b = j / p.block, at = j - b * p.block, end = std::min(hi, (b + 1) * p.block);
    fn(j, end - j, static_cast<const char*>(p.k_blocks[b]) + at * p.kv_stride * element,
       static_cast<const char*>(p.v_blocks[b]) + at * p.kv_stride_v * element);
    j = end;
  }
}

// Row i over an INT8 cache: one pass over its keys, one over its values, the codes widened in
// registers.
void run_int8_row(const Rows& p, int64_t i, float* scratch) {
  float* out = p.out + i * p.out_stride;
  std::fill_n(out, p.dv, 0.f);
  const int64_t lo = p.lo[i], hi = p.hi[i];
  if (hi <= lo) return;
  const float* q = p.q + i * p.q_stride;
  for_each_run(p, lo, hi, [&](int64_t j, int64_t n, const char* k, const char*) {
    loops().int8_scores(q, reinterpret_cast<const int8_t*>(k), p.kv_stride, n, p.d, scratch + (j - lo));
  });
  finish_logits(p, i, lo, hi, scratch);
  softmax(scratch, hi - lo, p.has_sink, sink_of(p, i));
  for_each_run(p, lo, hi, [&](int64_t j, int64_t n, const char*, const char* v) {
    loops().int8_accumulate(scratch + (j - lo), reinterpret_cast<const int8_t*>(v), p.kv_stride_v, n, p.dv, out);
  });
}

// Rows [i, i + rows) share the keys [lo, hi), lo < hi: one pass over the keys and one over the
// values for all of them, a row of scores each in scratch.
void run_group(const Rows& p, int64_t i, int rows, float* scratch) {
  const int64_t lo = p.lo[i], hi = p.hi[i], n = hi - lo;
  const float* q[kGroupRows];
  float* out[kGroupRows];
  for (int r = 0; r < rows; ++r) q[r] = p.q + (i + r) * p.q_stride, out[r] = p.out + (i + r) * p.out_stride;
  for_each_run(p, lo, hi, [&](int64_t j, int64_t m, const char* k, const char*) {
    loops().group_scores(q, rows, reinterpret_cast<const float*>(k), p.kv_stride, m, p.d, scratch + (j - lo), n);
  });
  for (int r = 0; r < rows; ++r) {
    finish_logits(p, i + r, lo, lo + n, scratch + r * n);
    softmax(scratch + r * n, n, p.has_sink, sink_of(p, i + r));
  }
  for (int r = 0; r < rows; ++r) std::fill_n(out[r], p.dv, 0.f);
  for_each_run(p, lo, hi, [&](int64_t j, int64_t m, const char*, const char* v) {
    loops().group_values(scratch + (j - lo), n, rows, reinterpret_cast<const float*>(v), p.kv_stride_v, m, p.dv, out);
  });
}

}  // namespace

int64_t scratch_floats(int64_t t) { return kGroupRows * t; }

void run(const Rows& p, float* scratch) {
  for (int64_t i = 0; i < p.sq;) {
    const int64_t lo = p.lo[i], hi = p.hi[i];
    if (int8_cache(p)) {
      run_int8_row(p, i++, scratch);
    } else if (hi <= lo) {
      std::fill_n(p.out + i++ * p.out_stride, p.dv, 0.f);
    } else {
      int rows = 1;
      while (rows < kGroupRows && i + rows < p.sq && p.lo[i + rows] == lo && p.hi[i + rows] == hi) ++rows;
      run_group(p, i, rows, scratch);
      i += rows;
    }
  }
}

void run_reference(const Rows& p) {
  // An INT8 cache is dequantized to float rows first (the test's plain twin, not a fast path).
  const bool int8 = int8_cache(p);
  auto row_of = [&](bool keys, int64_t j) {
    const int64_t stride = keys ? p.kv_stride : p.kv_stride_v, element = int8 ? 1 : int64_t(sizeof(float));
    if (p.k_blocks)
      return static_cast<const char*>((keys ? p.k_blocks : p.v_blocks)[j / p.block]) + (j % p.block) * stride * element;
    const void* base = keys ? (int8 ? static_cast<const void*>(p.k8) : p.k) : (int8 ? static_cast<const void*>(p.v8) : p.v);
    return static_cast<const char*>(base) + j * stride * element;
  };
  auto element_of = [&](bool keys, int64_t j, int64_t c) {
    const char* row = row_of(keys, j);
    if (!int8) return reinterpret_cast<const float*>(row)[c];
    const int8_t* codes = reinterpret_cast<const int8_t*>(row);
    return static_cast<float>(codes[c]) * int8_rows::scale_of(codes, keys ? p.d : p.dv);
  };
  auto key = [&](int64_t j, int64_t c) { return element_of(true, j, c); };
  auto value = [&](int64_t j, int64_t c) { return element_of(false, j, c); };
  for (int64_t i = 0; i < p.sq; ++i) {
    float* out = p.out + i * p.out_stride;
    std::fill_n(out, p.dv, 0.f);
    int64_t lo = p.lo[i], hi = p.hi[i];
    if (hi <= lo) continue;
    std::vector<double> s(static_cast<size_t>(hi - lo));
    const double sink = sink_of(p, i);
    double m = p.has_sink ? sink : -INFINITY;
    for (int64_t j = lo; j < hi; ++j) {
      double acc = 0;
      for (int64_t c = 0; c < p.d; ++c) acc += double(p.q[i * p.q_stride + c]) * key(j, c);
      acc *= p.scale;
      if (p.softcap > 0.f) acc = p.softcap * std::tanh(acc / p.softcap);
      if (p.bias) acc += p.bias[i * p.bias_stride + j];
      s[j - lo] = acc;
      m = std::max(m, acc);
    }
    double sum = p.has_sink ? std::exp(sink - m) : 0.0;
    for (double& x : s) sum += (x = std::exp(x - m));
    for (int64_t c = 0; c < p.dv; ++c) {
      double acc = 0;
      for (int64_t j = lo; j < hi; ++j) acc += s[j - lo] / sum * value(j, c);
      out[c] = static_cast<float>(acc);
    }
  }
}

void rotate(float* x, int64_t rotary_dim, const float* cos_row, const float* sin_row, bool interleaved) {
  int64_t half = rotary_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
    float xa = x[a], xb = x[b], c = cos_row[i], s = sin_row[i];
    x[a] = xa * c - xb * s;
    x[b] = xb * c + xa * s;
  }
}

}  // namespace mminfer::kernels::cached_attention
