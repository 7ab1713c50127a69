// Softmax and log-softmax of one row, accumulated in double so that rankings built on them do not
// depend on summation order. -infinity entries get probability 0.
#pragma once
#include <span>
#include <vector>

namespace mminfer::generate {

// Throws std::invalid_argument when a logit is NaN or every logit is -infinity.
std::vector<double> softmax(std::span<const float> logits);
void log_softmax(std::span<const float> logits, std::span<float> out);
// Entropy in nats of softmax(logits) (-infinity entries count as probability 0), in one pass
// without the probabilities:
// log S - sum(e_i d_i) / S with d_i = x_i - max and e_i = exp(d_i), S = sum(e_i).
double entropy_nats(std::span<const float> logits);

}  // namespace mminfer::generate
