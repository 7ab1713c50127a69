// Reads the JSON that tools/generate_reference.py writes (the ctest fixture generate_reference).
#pragma once
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace mminfer::generate::testing {

inline nlohmann::json read_reference(const std::string& name) {
  const std::string path = std::string(MMINFER_GENERATE_REFERENCE) + "/" + name;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("missing " + path + " (run the generate_reference test first)");
  std::ostringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

}  // namespace mminfer::generate::testing
