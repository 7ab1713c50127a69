// Collects one event per node execution and writes them as a Chrome trace.
#pragma once
#include <chrono>
#include <string>
#include <vector>

namespace mminfer::runtime {

struct TraceEvent {
  std::string name;
  std::string op_type;
  std::string shapes;  // "1x3x224x224, 768x768 -> 1x50x768"
  int64_t start_us = 0;
  int64_t duration_us = 0;
};

class Profiler {
 public:
  Profiler();
  int64_t now_us() const;
  void add(TraceEvent e) { events_.push_back(std::move(e)); }
  const std::vector<TraceEvent>& events() const { return events_; }
  // Events since `first` summed per op type, slowest first: {op type, total µs, count}.
  struct OpTotal {
    std::string op_type;
    int64_t total_us = 0;
    int64_t calls = 0;
  };
  std::vector<OpTotal> totals(size_t first = 0) const;
  void write_chrome_trace(const std::string& path) const;  // throws Error on I/O failure

 private:
  std::chrono::steady_clock::time_point origin_;
  std::vector<TraceEvent> events_;
};

}  // namespace mminfer::runtime
