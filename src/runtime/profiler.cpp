#include "runtime/profiler.h"

#include <algorithm>
#include <map>
#include <fstream>

#include "core/json_string.h"
#include "mminfer/status.h"

namespace mminfer::runtime {

Profiler::Profiler() : origin_(std::chrono::steady_clock::now()) {}

int64_t Profiler::now_us() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - origin_).count();
}

std::vector<Profiler::OpTotal> Profiler::totals(size_t first) const {
  std::map<std::string, OpTotal> by_type;
  for (size_t i = first; i < events_.size(); ++i) {
    OpTotal& t = by_type[events_[i].op_type];
    t.op_type = events_[i].op_type;
    t.total_us += events_[i].duration_us;
    ++t.calls;
  }
  std::vector<OpTotal> out;
  for (auto& [k, v] : by_type) out.push_back(v);
  std::sort(out.begin(), out.end(), [](const OpTotal& a, const OpTotal& b) { return a.total_us > b.total_us; });
  return out;
}

void Profiler::write_chrome_trace(const std::string& path) const {
  std::ofstream f(path);
  if (!f) throw Error("cannot write profile to " + path);
  f << "{\"traceEvents\":[\n";
  for (size_t i = 0; i < events_.size(); ++i) {
    const TraceEvent& e = events_[i];
    f << "{\"name\":\"" << json_escape(e.name) << "\",\"cat\":\"op\",\"ph\":\"X\",\"ts\":" << e.start_us
      << ",\"dur\":" << e.duration_us << ",\"pid\":1,\"tid\":1,\"args\":{\"op_type\":\"" << json_escape(e.op_type)
      << "\",\"shapes\":\"" << json_escape(e.shapes) << "\"}}" << (i + 1 < events_.size() ? ",\n" : "\n");
  }
  f << "],\"displayTimeUnit\":\"ms\"}\n";
  if (!f) throw Error("write failed: " + path);
}

}  // namespace mminfer::runtime
