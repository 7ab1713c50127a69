#include "generate/stop_strings.h"

#include <algorithm>
#include <stdexcept>

namespace mminfer::generate {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop_strings) : stops_(std::move(stop_strings)) {
  for (const std::string& s : stops_) {
    if (s.empty()) throw std::invalid_argument("stop strings must not be empty");
  }
}

StopStringMatcher::Result StopStringMatcher::push(std::string_view piece) {
  pending_ += piece;
  // The earliest match wins; nothing before pending_ can be part of a match (it was never held).
  size_t match = std::string::npos;
  for (const std::string& s : stops_) match = std::min(match, pending_.find(s));
  if (match != std::string::npos) {
    Result r{pending_.substr(0, match), true};
    pending_.clear();
    return r;
  }
  // Hold the longest tail that begins some stop string.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    for (size_t k = std::min(s.size() - 1, pending_.size()); k > hold; --k) {
      if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  Result r{pending_.substr(0, pending_.size() - hold), false};
  pending_.erase(0, pending_.size() - hold);
  return r;
}

std::string StopStringMatcher::flush() {
  std::string out = std::move(pending_);
  pending_.clear();
  return out;
}

}  // namespace mminfer::generate
