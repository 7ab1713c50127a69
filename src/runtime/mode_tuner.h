// Picks between two ways of running one shape signature (the plain one and an alternative:
// branches at once, or a held spin team) by timing both on its first runs.
#pragma once
#include <cstddef>
#include <limits>
#include <vector>

namespace mminfer::runtime {

class ModeTuner {
 public:
  // Each mode is timed `trials` times; the alternative is kept only when its best time is under
  // `win` times the plain mode's best. A plain run slower than `plain_limit_ms` decides for the
  // plain mode at once (the alternative's saving is fixed per call, so long runs would only pay
  // for its trials).
  explicit ModeTuner(double win = 0.93, std::size_t trials = 3,
                     double plain_limit_ms = std::numeric_limits<double>::infinity())
      : win_(win), trials_(trials), plain_limit_ms_(plain_limit_ms) {}
  bool decided() const { return decided_; }
  bool alternative() const { return alternative_; }
  // The mode to time next: plain first, then alternating.
  bool next_is_alternative() const { return alternative_times_.size() < plain_times_.size(); }
  // The mode to use now: the decision once made, else the next trial.
  bool use_alternative() const { return decided_ ? alternative_ : next_is_alternative(); }
  void record(bool alternative, double ms);

 private:
    double win_;
  std::size_t trials_;
  double plain_limit_ms_;
  std::vector<double> plain_times_, alternative_times_;
  bool decided_ = false, alternative_ = false;
};

}  // namespace mminfer::runtime
