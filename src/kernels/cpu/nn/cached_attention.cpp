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

// Row i over an INT8 cache: one pass over its keys, one over its values, the codes widened in
// registers.
void run_int8_row(const Rows& p, int64_t i, float* scratch) {
  float* out = p.out + i * p.out_stride;
  std::fill_n(out, p.dv, 0.f);
  const int64_t lo = p.lo[i], hi = p.hi[i];
  if (hi <= lo) return;
  const float* q = p.q + i * p.q_stride;
  const int8_t* k = p.k8 + lo * p.kv_stride;
  loops().int8_scores(q, k, p.kv_stride, hi - lo, p.d, scratch);
  finish_logits(p, i, lo, hi, scratch);
  softmax(scratch, hi - lo, p.has_sink, sink_of(p, i));
  const int8_t* v = p.v8 + lo * p.kv_stride_v;
  loops().int8_accumulate(scratch, v, p.kv_stride_v, hi - lo, p.dv, out);
}

// Rows [i, i + rows) share the keys [lo, hi), lo < hi: one pass over the keys and one over the
// values for all of them, a row of scores each in scratch.
void run_group(const Rows& p, int64_t i, int rows, float* scratch) {
  const int64_t lo = p.lo[i], n = p.hi[i] - lo;
  const float* q[kGroupRows];
  float* out[kGroupRows];
  for (int r = 0; r < rows; ++r) q[r] = p.q + (i + r) * p.q_stride, out[r] = p.out + (i + r) * p.out_stride;
  loops().group_scores(q, rows, p.k + lo * p.kv_stride, p.kv_stride, n, p.d, scratch, n);
  for (int r = 0; r < rows; ++r) {
    finish_logits(p, i + r, lo, lo + n, scratch + r * n);
    softmax(scratch + r * n, n, p.has_sink, sink_of(p, i + r));
  }
  loops().group_values(scratch, n, rows, p.v + lo * p.kv_stride_v, p.kv_stride_v, n, p.dv, out);
}

}  // namespace

int64_t scratch_floats(int64_t t) { return kGroupRows * t; }

void run(const Rows& p, float* scratch) {
  for (int64_t i = 0; i < p.sq;) {
    const int64_t lo = p.lo[i], hi = p.hi[i];
    if (p.k8) {
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
  auto key = [&](int64_t j, int64_t c) {
    if (!p.k8) return p.k[j * p.kv_stride + c];
    const int8_t* row = p.k8 + j * p.kv_stride;
    return static_cast<float>(row[c]) * int8_rows::scale_of(row, p.d);
  };
  auto value = [&](int64_t j, int64_t c) {
    if (!p.v8) return p.v[j * p.kv_stride_v + c];
    const int8_t* row = p.v8 + j * p.kv_stride_v;
    return static_cast<float>(row[c]) * int8_rows::scale_of(row, p.dv);
  };
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
