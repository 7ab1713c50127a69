#include "cli/json_output.h"

#include <cstdio>
#include <fstream>

#include "cli/args.h"
#include "cli/output_text.h"
#include "mminfer/status.h"

namespace mminfer::cli {

JsonForm json_flag(const Args& args) {
  if (args.has("--json") && args.has("--jsonl"))
    throw Error("give --json (one document) or --jsonl (a line per input), not both");
  if (args.has("--json")) return JsonForm::kDocument;
  return args.has("--jsonl") ? JsonForm::kLines : JsonForm::kNone;
}

std::string json_text(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

void write_json_file(const std::string& path, const nlohmann::ordered_json& value) {
  std::ofstream f(path);
  if (!f) throw Error("cannot write " + path);
  f << json_text(value) << "\n";
  if (!f) throw Error("cannot write " + path);
}

void JsonResults::add_error(const char* command, const std::string& file, const std::string& error) {
  if (on()) add({{"file", file}, {"error", error}});
  std::fprintf(stderr, "mminfer %s: error: %s: %s\n", command, one_line_text(file).c_str(), error.c_str());
}

void JsonResults::add(nlohmann::ordered_json result) {
  if (form_ == JsonForm::kLines) {
    std::printf("%s\n", json_text(result).c_str());
    std::fflush(stdout);
  } else if (form_ == JsonForm::kDocument) {
    results_.push_back(std::move(result));
  }
}

void JsonResults::finish(const nlohmann::ordered_json& extra) {
  if (form_ != JsonForm::kDocument) return;
  nlohmann::ordered_json doc{{"results", results_}};
  for (const auto& [key, value] : extra.items()) doc[key] = value;
  std::printf("%s\n", json_text(doc).c_str());
  std::fflush(stdout);
  results_ = nlohmann::ordered_json::array();
}

}  // namespace mminfer::cli
