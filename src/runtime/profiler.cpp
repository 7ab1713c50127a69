#include "runtime/profiler.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <fstream>

#include "mminfer/status.h"

namespace mminfer::runtime {

Profiler::Profiler() : origin_(std::chrono::steady_clock::now()) {}

int64_t Profiler::now_us() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - origin_).count();
}

std::string json_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
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
