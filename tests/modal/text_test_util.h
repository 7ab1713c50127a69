// Helpers for the tokenizer tests: data paths, file reading, reference cases.
#pragma once
#include <gtest/gtest.h>

#include <time.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "modal/text/tokenizer.h"

namespace text_test {

inline std::string data_path(const std::string& name) { return std::string(MMINFER_TEXT_DATA) + "/" + name; }
inline std::string generated_path(const std::string& name) { return std::string(MMINFER_TEXT_GENERATED) + "/" + name; }

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The reference tools write {"cases": [{"text": ..., "ids": [...], ...}]}.
inline nlohmann::json read_cases(const std::string& path) {
  std::string text = read_file(path);
  if (text.empty()) ADD_FAILURE() << path << " is missing or empty (its ctest fixture makes it)";
  return text.empty() ? nlohmann::json::array() : nlohmann::json::parse(text)["cases"];
}

inline std::vector<int64_t> ids_of(const nlohmann::json& a) { return a.get<std::vector<int64_t>>(); }

// Readable form of text with control characters, for failure messages.
inline std::string escaped(const std::string& s, size_t limit = 80) {
  std::string out;
  for (unsigned char c : s.substr(0, limit)) {
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else out += static_cast<char>(c);
  }
  return out + (s.size() > limit ? "..." : "");
}

// CPU time of the calling thread: steadier than wall time on a machine shared with builds.
inline double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

}  // namespace text_test
