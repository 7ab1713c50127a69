#include "generate/softmax.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace mminfer::generate {
namespace {

double checked_max(std::span<const float> logits) {
  double max = -std::numeric_limits<double>::infinity();
  for (float x : logits) {
    if (std::isnan(x)) throw std::invalid_argument("logits contain NaN");
    if (x > max) max = x;
  }
  if (max == -std::numeric_limits<double>::infinity()) {
    throw std::invalid_argument("every token is masked (all logits are -inf)");
  }
  if (std::isinf(max)) throw std::invalid_argument("logits contain +inf");
  return max;
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
  double sum = 0.0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max);
  const double log_norm = max + std::log(sum);
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<float>(static_cast<double>(logits[i]) - log_norm);
}

}  // namespace mminfer::generate
