// A JSON file read whole, with one-line errors that name the file (and the byte at fault).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace mminfer::serve {

nlohmann::json read_json_file(const std::string& path);

}  // namespace mminfer::serve
