#include "serve/kserve_tensors.h"

#include <gtest/gtest.h>

#include <cstring>

#include <nlohmann/json.hpp>

namespace mminfer::serve {
namespace {

std::vector<ValueInfo> inputs() {
  ValueInfo x{"x", DType::kFloat32, true, {-1, 3}, {"batch", ""}};
  ValueInfo ids{"ids", DType::kInt8, true, {2}, {""}};
  return {x, ids};
}
std::vector<ValueInfo> outputs() { return {ValueInfo{"y", DType::kFloat32, true, {-1, 3}, {}}}; }

std::string error_of(const std::string& body, std::optional<size_t> header = std::nullopt) {
  try {
    parse_infer_request(body, header, inputs(), outputs());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(KServeTensors, ParsesNestedAndFlatJsonData) {
  InferRequest r = parse_infer_request(
      R"({"id": "7", "inputs": [{"name": "ids", "datatype": "INT8", "shape": [2], "data": [-128, 127]},
                                {"name": "x", "datatype": "FP32", "shape": [2, 3], "data": [[1, 2, 3], [4, 5, 6.5]]}],
          "outputs": [{"name": "y", "parameters": {"binary_data": true}}]})",
      std::nullopt, inputs(), outputs());
  EXPECT_EQ(r.id, "7");
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(r.inputs[0].first, "x");  // in the model's order
  EXPECT_EQ(r.inputs[0].second.shape(), (Shape{2, 3}));
  EXPECT_FLOAT_EQ(r.inputs[0].second.data<float>()[5], 6.5f);
  EXPECT_EQ(r.inputs[1].second.data<int8_t>()[0], -128);
  EXPECT_EQ(r.outputs.binary.count("y"), 1u);
}

TEST(KServeTensors, ParsesBinaryData) {
  float x[6] = {1, 2, 3, 4, 5, 6};
  int8_t ids[2] = {-1, 2};
  std::string header =
      R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 3], "parameters": {"binary_data_size": 24}},
                     {"name": "ids", "datatype": "INT8", "shape": [2], "parameters": {"binary_data_size": 2}}]})";
  std::string body = header + std::string(reinterpret_cast<char*>(x), 24) + std::string(reinterpret_cast<char*>(ids), 2);
  InferRequest r = parse_infer_request(body, header.size(), inputs(), outputs());
  EXPECT_FLOAT_EQ(r.inputs[0].second.data<float>()[4], 5.f);
  EXPECT_EQ(r.inputs[1].second.data<int8_t>()[0], -1);
  EXPECT_NE(error_of(body + "x", header.size()).find("not claimed"), std::string::npos);
  EXPECT_NE(error_of(body.substr(0, body.size() - 1), header.size()).find("ends before"), std::string::npos);
  EXPECT_NE(error_of(body, body.size() + 1).find("larger than the body"), std::string::npos);
}

TEST(KServeTensors, BadRequestsNameTheProblem) {
  const std::string ids = R"({"name": "ids", "datatype": "INT8", "shape": [2], "data": [1, 2]})";
  auto with = [&](const std::string& x) { return R"({"inputs": [)" + x + ", " + ids + "]}"; };
  EXPECT_NE(error_of("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("[]").find("JSON object"), std::string::npos);
  EXPECT_NE(error_of(R"({"inputs": [)" + ids + "]}").find("input 'x' is missing"), std::string::npos);
  EXPECT_NE(error_of(with(R"({"name": "x", "datatype": "INT64", "shape": [1, 3], "data": [1, 2, 3]})")).find("takes FP32, not INT64"),
            std::string::npos);
  EXPECT_NE(error_of(with(R"({"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]})")).find("dimension 1 must be 3"),
            std::string::npos);
  EXPECT_NE(error_of(with(R"({"name": "x", "datatype": "FP32", "shape": [3], "data": [1, 2, 3]})")).find("rank 2"), std::string::npos);
  EXPECT_NE(error_of(with(R"({"name": "x", "datatype": "FP32", "shape": [1, 3], "data": [1, 2]})")).find("2 values for a shape of 3"),
            std::string::npos);
  EXPECT_NE(error_of(with(R"({"name": "x", "datatype": "FP32", "shape": [1, 3], "data": [1, "a", 3]})")).find("element 1 is not a number"),
            std::string::npos);
  EXPECT_NE(error_of(with(R"({"name": "z", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3]})")).find("'z' is not an input"),
            std::string::npos);
  EXPECT_NE(error_of(with(R"({"name": "x", "datatype": "FP32", "shape": [-1, 3], "data": []})")).find("integers >= 0"), std::string::npos);
  EXPECT_NE(error_of(with(R"({"name": "x", "datatype": "FP32", "shape": [1000000, 1000000, 3], "data": []})")).find("holds more than"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3]},
                                   {"name": "ids", "datatype": "INT8", "shape": [2], "data": [1, 300]}]})")
                .find("element 1 (300) is not a valid value"),
            std::string::npos);
  EXPECT_NE(error_of(with(R"({"name": "x", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3]}, )" + ids)).find("given twice"),
            std::string::npos);
}

TEST(KServeTensors, ResponsesInJsonAndBinary) {
  Tensor y = Tensor::empty(DType::kFloat32, {1, 3});
  float v[3] = {0.5f, -1.f, 2.f};
  std::memcpy(y.raw(), v, sizeof v);
  InferRequest r;
  r.id = "abc";
  InferResponseBody json_body = make_infer_response("m", 2, r, outputs(), {y});
  EXPECT_FALSE(json_body.header_length);
  auto j = nlohmann::json::parse(json_body.body);
  EXPECT_EQ(j["model_version"], "2");
  EXPECT_EQ(j["id"], "abc");
  EXPECT_EQ(j["outputs"][0]["data"], nlohmann::json({0.5, -1.0, 2.0}));
  r.outputs.all_binary = true;
  InferResponseBody bin = make_infer_response("m", 2, r, outputs(), {y});
  ASSERT_TRUE(bin.header_length);
  auto h = nlohmann::json::parse(bin.body.substr(0, *bin.header_length));
  EXPECT_EQ(h["outputs"][0]["parameters"]["binary_data_size"], 12);
  EXPECT_EQ(bin.body.substr(*bin.header_length), std::string(reinterpret_cast<char*>(v), 12));
}

}  // namespace
}  // namespace mminfer::serve
