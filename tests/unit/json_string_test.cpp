// The shared JSON string escaper against Python's json.dumps(s, ensure_ascii=False) (expected
// strings taken from CPython 3) and against an independent JSON parser (nlohmann), which must
// read every escaped string back as the original bytes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "core/json_string.h"

using mminfer::append_json_escaped;
using mminfer::json_escape;

namespace {

// json.dumps(s, ensure_ascii=False) without its enclosing quotes.
TEST(JsonString, MatchesPythonJsonDumps) {
  const std::pair<std::string, std::string> cases[] = {
      {"plain", "plain"},
      {"", ""},
      {"say \"hi\"", "say \\\"hi\\\""},
      {"back\\slash", "back\\\\slash"},
      {"a\nb\rc\td", "a\\nb\\rc\\td"},
      {"\b\f", "\\b\\f"},
      {std::string("\x00\x01\x1f\x7f", 4), "\\u0000\\u0001\\u001f\x7f"},
      {"\x1b[0m", "\\u001b[0m"},
      {"h\xc3\xa9llo \xe2\x82\xac\xf0\x9d\x84\x9e", "h\xc3\xa9llo \xe2\x82\xac\xf0\x9d\x84\x9e"},
      {"<|im_start|>user\n{\"k\": [1]}", "<|im_start|>user\\n{\\\"k\\\": [1]}"},
  };
  for (const auto& [in, want] : cases) EXPECT_EQ(json_escape(in), want) << "input: " << in;
}

TEST(JsonString, EveryAsciiByteParsesBackAsItself) {
  for (int c = 0; c < 0x80; ++c) {
    const std::string in(1, static_cast<char>(c));
    const std::string escaped = json_escape(in);
    if (c < 0x20 || c == '"' || c == '\\') {
      EXPECT_EQ(escaped[0], '\\') << "byte " << c;
    }
    EXPECT_EQ(nlohmann::json::parse("\"" + escaped + "\"").get<std::string>(), in) << "byte " << c;
  }
}

TEST(JsonString, Utf8TextParsesBackUnchanged) {
  const std::string in = "\xe4\xbd\xa0\xe5\xa5\xbd \"q\" \\ \xf0\x9f\x98\x80\t\x01 \xd0\x96";
  EXPECT_EQ(nlohmann::json::parse("\"" + json_escape(in) + "\"").get<std::string>(), in);
}

TEST(JsonString, InvalidUtf8PassesThroughUnchanged) {
  // A lone continuation byte, a truncated sequence, an overlong form and bytes never valid.
  const std::string in = std::string("a\x80", 2) + "\xc3" + "(" + "\xc0\xaf" + "\xff\xfe" + "\xe2\x82";
  EXPECT_EQ(json_escape(in), in);
  const std::string mixed = std::string("\xff") + "\n\"";
  EXPECT_EQ(json_escape(mixed), "\xff\\n\\\"");
}

TEST(JsonString, AppendsAfterWhatIsThere) {
  std::string out = "{\"k\": \"";
  append_json_escaped(out, "v\n");
  EXPECT_EQ(out, "{\"k\": \"v\\n");
}

}  // namespace
