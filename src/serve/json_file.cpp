#include "serve/json_file.h"

#include <fstream>
#include <sstream>

#include "mminfer/status.h"

namespace mminfer::serve {

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(path + ": not valid JSON (byte " + std::to_string(e.byte) + ")");
  }
}

}  // namespace mminfer::serve
