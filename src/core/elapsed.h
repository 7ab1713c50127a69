// Milliseconds between steady-clock instants, for the timings commands and metrics report.
#pragma once
#include <chrono>

namespace mminfer {

inline double ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

inline double ms_since(std::chrono::steady_clock::time_point t0) { return ms_between(t0, std::chrono::steady_clock::now()); }

}  // namespace mminfer
