#include "generate/softmax.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "kernels/cpu/common/vector_math.h"

namespace mminfer::generate {
namespace {

// Eight lanes at a time: a decode step's rows hold tens of thousands of logits each.
double checked_max(std::span<const float> logits) {
  const size_t n = logits.size(), whole = n / 8 * 8;
  __m256 vmax = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 nan = _mm256_setzero_ps();
  for (size_t i = 0; i < whole; i += 8) {
    const __m256 x = _mm256_loadu_ps(logits.data() + i);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    vmax = _mm256_max_ps(vmax, x);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vmax);
  bool has_nan = _mm256_movemask_ps(nan) != 0;
  double max = -std::numeric_limits<double>::infinity();
  for (float x : lanes) max = std::max<double>(max, x);
  for (size_t i = whole; i < n; ++i) {
    has_nan = has_nan || std::isnan(logits[i]);
    max = std::max<double>(max, logits[i]);
  }
  if (has_nan) throw std::invalid_argument("logits contain NaN");
  if (max == -std::numeric_limits<double>::infinity()) {
    throw std::invalid_argument("every token is masked (all logits are -inf)");
  }
  if (std::isinf(max)) throw std::invalid_argument("logits contain +inf");
  return max;
}

// sum_i exp(x_i - max): the exponentials in float, eight at a time, summed in double; -inf
// logits add exactly 0.
double sum_exp(std::span<const float> logits, double max) {
  const size_t n = logits.size(), whole = n / 8 * 8;
  const __m256 m = _mm256_set1_ps(static_cast<float>(max)), minus_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  for (size_t i = 0; i < whole; i += 8) {
    const __m256 x = _mm256_loadu_ps(logits.data() + i);
    const __m256 e = _mm256_and_ps(kernels::vmath::exp_avx2(_mm256_sub_ps(x, m)), _mm256_cmp_ps(x, minus_inf, _CMP_NEQ_OQ));
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(lo, hi));
  double sum = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (size_t i = whole; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
  return sum;
}

}  // namespace

std::vector<double> softmax(std::span<const float> logits) {
  const double max = checked_max(logits);
  std::vector<double> probs(logits.size());
  double sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    probs[i] = std::exp(static_cast<double>(logits[i]) - max);
    sum += probs[i];
  }
  for (double& p : probs) p /= sum;
  return probs;
}

void log_softmax(std::span<const float> logits, std::span<float> out) {
  const double max = checked_max(logits);
  const double log_norm = max + std::log(sum_exp(logits, max));
  const size_t n = logits.size(), whole = n / 4 * 4;
  const __m256d norm = _mm256_set1_pd(log_norm);
  for (size_t i = 0; i < whole; i += 4)  // in double, then rounded once, as the scalar tail
    _mm_storeu_ps(out.data() + i, _mm256_cvtpd_ps(_mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(logits.data() + i)), norm)));
  for (size_t i = whole; i < n; ++i) out[i] = static_cast<float>(static_cast<double>(logits[i]) - log_norm);
}

double entropy_nats(std::span<const float> logits) {
  const double max = checked_max(logits);
  double sum = 0.0, weighted = 0.0;
  for (float x : logits) {
    const double d = static_cast<double>(x) - max, e = std::exp(d);
    if (e > 0) sum += e, weighted += e * d;  // exp(-inf) = 0 adds nothing (and 0 * -inf would be NaN)
  }
  return std::log(sum) - weighted / sum;
}

}  // namespace mminfer::generate
