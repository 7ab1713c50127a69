// Softmax and log-softmax of one row, accumulated in double so that rankings built on them do not
// depend on summation order. -infinity entries get probability 0.
#pragma once
#include <span>
#include <vector>

namespace mminfer::generate {

// Throws std::invalid_argument when a logit is NaN or every logit is -infinity.
std::vector<double> softmax(std::span<const float> logits);
void log_softmax(std::span<const float> logits, std::span<float> out);

}  // namespace mminfer::generate
