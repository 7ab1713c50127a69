#include "runtime/mode_tuner.h"

#include <algorithm>

namespace mminfer::runtime {

void ModeTuner::record(bool alternative, double ms) {
  if (decided_) return;
  if (!alternative && ms > plain_limit_ms_) {
    decided_ = true, alternative_ = false;
    return;
  }
  (alternative ? alternative_times_ : plain_times_).push_back(ms);
  if (plain_times_.size() < trials_ || alternative_times_.size() < trials_) return;
  // Best of each: on a shared machine noise only adds time. The alternative must win clearly,
  // since a wrong pick sticks.
  double plain = *std::min_element(plain_times_.begin(), plain_times_.end());
  double alt = *std::min_element(alternative_times_.begin(), alternative_times_.end());
  alternative_ = alt < win_ * plain;
  decided_ = true;
}

}  // namespace mminfer::runtime
