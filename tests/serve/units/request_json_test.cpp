#include "serve/request_json.h"

#include <gtest/gtest.h>

#include <string>

#include "mminfer/status.h"

namespace mminfer::serve {
namespace {

std::string nested(size_t levels) { return std::string(levels, '[') + "1" + std::string(levels, ']'); }

std::string error_of(const std::string& text) {
  try {
    parse_request_json(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RequestJson, CountsNestingOutsideStrings) {
  EXPECT_EQ(json_nesting("1"), 0u);
  EXPECT_EQ(json_nesting(R"({"a": [1, {"b": []}]})"), 4u);
  EXPECT_EQ(json_nesting(R"({"a": "[[[[{{{{"})"), 1u);
  EXPECT_EQ(json_nesting(R"({"a": "\"[[[["})"), 1u) << "an escaped quote does not end the string";
  EXPECT_EQ(json_nesting(nested(80000)), 80000u);
}

TEST(RequestJson, RefusesDeepNestingBeforeParsing) {
  EXPECT_EQ(error_of(nested(kMaxJsonDepth)), "");
  EXPECT_EQ(error_of(nested(kMaxJsonDepth + 1)), "the request's JSON is nested deeper than 64 levels");
  // What crashed the server with a stack overflow: tensor data 80,000 levels deep.
  std::string body = R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": )" + nested(80000) + "}]}";
  EXPECT_EQ(error_of(body), "the request's JSON is nested deeper than 64 levels");
  EXPECT_NE(error_of("{").find("not valid JSON (byte"), std::string::npos);
}

}  // namespace
}  // namespace mminfer::serve
