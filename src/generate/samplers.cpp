#include "generate/samplers.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "generate/softmax.h"

namespace mminfer::generate {

TokenId greedy_token(std::span<const float> logits) {
  TokenId best = kNoToken;
  float best_value = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) throw std::invalid_argument("logits contain NaN");
    if (logits[i] > best_value) {
      best_value = logits[i];
      best = static_cast<TokenId>(i);
    }
  }
  if (best == kNoToken) throw std::invalid_argument("every token is masked (all logits are -inf)");
  return best;
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
