// --json and --jsonl for the commands with one result per input (ocr, embed, classify):
// --json prints ONE JSON document, {"results": [...]}, once every input has run; --jsonl prints
// each result as it comes, one JSON object a line (JSON Lines).
#pragma once
#include <nlohmann/json.hpp>

namespace mminfer::cli {

class Args;

enum class JsonForm { kNone, kDocument, kLines };

// --json (kDocument), --jsonl (kLines), neither (kNone); both is an error.
JsonForm json_flag(const Args& args);

class JsonResults {
 public:
  explicit JsonResults(JsonForm form) : form_(form) {}
  bool on() const { return form_ != JsonForm::kNone; }
  // One input's result: printed now with --jsonl, kept for the document with --json.
  void add(nlohmann::ordered_json result);
  // One input that failed: "mminfer <command>: error: <file>: <error>" on stderr, and
  // {"file", "error"} among the results when JSON is on.
  void add_error(const char* command, const std::string& file, const std::string& error);
  // With --json, prints the document, with the members of `extra` after "results"; does
  // nothing otherwise.
  void finish(const nlohmann::ordered_json& extra = nlohmann::ordered_json::object());

 private:
  JsonForm form_;
  nlohmann::ordered_json results_ = nlohmann::ordered_json::array();
};

// `value` on one line; invalid UTF-8 in strings becomes U+FFFD rather than an exception.
std::string json_text(const nlohmann::ordered_json& value);

// `value` as one line of JSON in `path` (a command's --report FILE); throws Error when it cannot.
void write_json_file(const std::string& path, const nlohmann::ordered_json& value);

}  // namespace mminfer::cli
