#include "generate/samplers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "generate/softmax.h"

namespace mminfer::generate {

TokenId greedy_token(std::span<const float> logits) {
  // The largest value first, in 16 lanes the compiler keeps in vector registers (a scan that
  // branches on every logit took ~15 us of a 32,000-token step), then its first position.
  constexpr size_t kLanes = 16;
  float lane_max[kLanes];
  bool lane_nan[kLanes] = {};
  std::fill_n(lane_max, kLanes, -std::numeric_limits<float>::infinity());
  const size_t whole = logits.size() / kLanes * kLanes;
  for (size_t i = 0; i < whole; i += kLanes)
    for (size_t l = 0; l < kLanes; ++l) {
      const float v = logits[i + l];
      lane_nan[l] |= v != v;
      lane_max[l] = v > lane_max[l] ? v : lane_max[l];
    }
  float best_value = -std::numeric_limits<float>::infinity();
  bool nan = false;
  for (size_t l = 0; l < kLanes; ++l) nan = nan || lane_nan[l], best_value = std::max(best_value, lane_max[l]);
  for (size_t i = whole; i < logits.size(); ++i) nan = nan || std::isnan(logits[i]), best_value = std::max(best_value, logits[i]);
  if (nan) throw std::invalid_argument("logits contain NaN");
  if (best_value == -std::numeric_limits<float>::infinity())
    throw std::invalid_argument("every token is masked (all logits are -inf)");
  size_t i = 0;
  while (logits[i] != best_value) ++i;
  return static_cast<TokenId>(i);
}

TokenId sample_token(std::span<const float> logits, Pcg32& rng) {
  const std::vector<double> probs = softmax(logits);
  const double u = rng.next_double();
  double cumulative = 0.0;
  TokenId last_possible = kNoToken;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0.0) continue;
    last_possible = static_cast<TokenId>(i);
    cumulative += probs[i];
    if (u < cumulative) return last_possible;
  }
  return last_possible;  // u landed in the rounding gap below 1
}

}  // namespace mminfer::generate
