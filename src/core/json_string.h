// The inside of a JSON string literal, as Python's json.dumps(s, ensure_ascii=False) writes it:
// `"` `\` and the control characters escaped (\n \r \t \b \f by name, the rest as \u00xx), every
// other byte kept as it is. Bytes that are not valid UTF-8 pass through too: the text is the
// caller's, and dropping bytes would hide what it held.
#pragma once
#include <string>
#include <string_view>

namespace mminfer {

void append_json_escaped(std::string& out, std::string_view s);

inline std::string json_escape(std::string_view s) {
  std::string out;
  append_json_escaped(out, s);
  return out;
}

}  // namespace mminfer
