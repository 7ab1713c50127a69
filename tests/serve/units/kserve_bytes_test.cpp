#include "serve/kserve_bytes.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "mminfer/status.h"

namespace mminfer::serve {
namespace {

PipelineSignature clip_like() {
  return {{{"image", "BYTES", {-1}, true}, {"text", "BYTES", {-1}, false}},
          {{"image_embedding", "FP32", {-1, -1}}, {"text_embedding", "FP32", {-1, -1}}}};
}

std::string le32(uint32_t n) { return std::string{char(n & 255), char(n >> 8 & 255), char(n >> 16 & 255), char(n >> 24 & 255)}; }

std::string error_of(const std::string& body, std::optional<size_t> header = std::nullopt) {
  try {
    parse_bytes_request(body, header, clip_like());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(KServeBytes, JsonTextsAsTheyAreAndFilesAsBase64) {
  BytesRequest r = parse_bytes_request(
      R"({"id": "q", "inputs": [{"name": "text", "datatype": "BYTES", "shape": [2], "data": ["caf\u00e9", "b"]},
                               {"name": "image", "datatype": "BYTES", "shape": [1], "data": ["aGk="]}]})",
      std::nullopt, clip_like());
  EXPECT_EQ(r.id, "q");
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(r.inputs[0].name, "image");  // in the signature's order
  EXPECT_EQ(r.inputs[0].elements, std::vector<std::string>{"hi"});
  EXPECT_EQ(r.inputs[1].elements, (std::vector<std::string>{"caf\xc3\xa9", "b"}));
}

TEST(KServeBytes, BinaryElementsAreLengthPrefixed) {
  std::string data = le32(3) + "abc" + le32(2) + "\xff\x00";
  data.resize(4 + 3 + 4 + 2);
  std::string header = R"({"inputs": [{"name": "image", "datatype": "BYTES", "shape": [2], "parameters": {"binary_data_size": )" +
                       std::to_string(data.size()) + "}}]}";
  BytesRequest r = parse_bytes_request(header + data, header.size(), clip_like());
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_EQ(r.inputs[0].elements[0], "abc");
  EXPECT_EQ(r.inputs[0].elements[1], std::string("\xff\x00", 2));
  // One element fewer than the shape, a length past the end, a size past the body.
  std::string one = R"({"inputs": [{"name": "text", "datatype": "BYTES", "shape": [2], "parameters": {"binary_data_size": 5}}]})";
  EXPECT_NE(error_of(one + le32(1) + "x", one.size()).find("holds 1 elements for a shape of 2"), std::string::npos);
  std::string lie = R"({"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "parameters": {"binary_data_size": 5}}]})";
  EXPECT_NE(error_of(lie + le32(1u << 31) + "x", lie.size()).find("claims 2147483648 bytes"), std::string::npos);
  std::string big = R"({"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "parameters": {"binary_data_size": 4294967296}}]})";
  EXPECT_NE(error_of(big + "abc", big.size()).find("ends before"), std::string::npos);
}

TEST(KServeBytes, BadRequestsNameTheInput) {
  auto in = [](const std::string& x) { return R"({"inputs": [)" + x + "]}"; };
  EXPECT_NE(error_of(in(R"({"name": "text", "datatype": "FP32", "shape": [1], "data": [1]})")).find("'text': the model takes BYTES, not FP32"),
            std::string::npos);
  EXPECT_NE(error_of(in(R"({"name": "text", "datatype": "BYTES", "shape": [1, 1], "data": ["a"]})")).find("rank 1, got rank 2"),
            std::string::npos);
  EXPECT_NE(error_of(in(R"({"name": "text", "datatype": "BYTES", "shape": [268435456], "data": ["a"]})")).find("more than 65536"),
            std::string::npos);
  EXPECT_NE(error_of(in(R"({"name": "text", "datatype": "BYTES", "shape": [3], "data": ["a"]})")).find("1 values for a shape of 3"),
            std::string::npos);
  EXPECT_NE(error_of(in(R"({"name": "text", "datatype": "BYTES", "shape": [1], "data": [7]})")).find("element 0 is not a string"),
            std::string::npos);
  EXPECT_NE(error_of(in(R"({"name": "text", "datatype": "BYTES", "shape": [1], "data": [""]})")).find("element 0 is empty"),
            std::string::npos);
  EXPECT_NE(error_of(in(R"({"name": "image", "datatype": "BYTES", "shape": [1], "data": ["%%"]})")).find("'image': element 0 is not base64"),
            std::string::npos);
  EXPECT_NE(error_of(in(R"({"name": "text", "datatype": "BYTES", "shape": [-1], "data": ["a"]})")).find(">= 0"), std::string::npos);
  EXPECT_NE(error_of(R"({"inputs": []})").find("'inputs' list"), std::string::npos);
  EXPECT_NE(error_of(in(R"({"name": "audio", "datatype": "BYTES", "shape": [1], "data": ["a"]})")).find("'audio' is not an input"),
            std::string::npos);
}

TEST(KServeBytes, ResponsesInJsonAndBinary) {
  BytesRequest r;
  std::vector<ResponseTensor> outs = {{"e", "FP32", {1, 2}, {0.5f, -1.f}, {}}, {"t", "BYTES", {2}, {}, {"ab", "c"}}};
  auto j = nlohmann::json::parse(make_bytes_response("m", 1, r, outs).body);
  EXPECT_EQ(j["outputs"][0]["data"], nlohmann::json({0.5, -1.0}));
  EXPECT_EQ(j["outputs"][1]["data"], nlohmann::json({"ab", "c"}));
  r.outputs.binary = {"t"};
  r.outputs.names = {"t"};
  InferResponseBody b = make_bytes_response("m", 1, r, outs);
  ASSERT_TRUE(b.header_length);
  auto h = nlohmann::json::parse(b.body.substr(0, *b.header_length));
  ASSERT_EQ(h["outputs"].size(), 1u);
  EXPECT_EQ(h["outputs"][0]["parameters"]["binary_data_size"], 11);
  EXPECT_EQ(b.body.substr(*b.header_length), le32(2) + "ab" + le32(1) + "c");
}

}  // namespace
}  // namespace mminfer::serve
