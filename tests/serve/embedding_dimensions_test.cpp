// OpenAI's `dimensions`: honoured only for the lengths a model was trained for, every other
// value refused with a 400 naming the parameter; shortened vectors are unit length again.
#include "serve/embedding_dimensions.h"

#include <cmath>

#include <gtest/gtest.h>

#include "serve/openai_error.h"

namespace mminfer::serve {
namespace {

using nlohmann::json;

// The RequestError requested_dimensions throws for `request`, or a failure when it throws none.
RequestError refusal(const json& request, size_t full, const std::vector<size_t>& trained) {
  try {
    requested_dimensions(request, "m", full, trained);
  } catch (const RequestError& e) {
    return e;
  }
  ADD_FAILURE() << request.dump() << " was accepted";
  return RequestError(0, "");
}

TEST(EmbeddingDimensions, AbsentOrNullAsksForNothing) {
  EXPECT_EQ(requested_dimensions(json::object(), "m", 512, {}), 0u);
  EXPECT_EQ(requested_dimensions(json{{"dimensions", nullptr}}, "m", 512, {}), 0u);
}

TEST(EmbeddingDimensions, TrainedLengthsAndTheFullSizeAreHonoured) {
  EXPECT_EQ(requested_dimensions(json{{"dimensions", 128}}, "m", 512, {64, 128, 256}), 128u);
  EXPECT_EQ(requested_dimensions(json{{"dimensions", 512}}, "m", 512, {}), 512u);
}

TEST(EmbeddingDimensions, RefusesWithParamDimensions) {
  struct Case {
    json value;
    std::vector<size_t> trained;
    const char* says;
  };
  for (const Case& c : {Case{100, {64, 128}, "trained for dimensions 64 or 128"},
                        Case{100, {}, "not trained for shortened embeddings"},
                        Case{0, {64}, "at least 1"},
                        Case{-5, {64}, "at least 1"},
                        Case{2.5, {64}, "whole number"},
                        Case{"64", {64}, "whole number"},
                        Case{true, {64}, "whole number"},
                        Case{513, {64}, "more than the 512 dimensions"},
                        Case{json(uint64_t{1} << 40), {64}, "too large"}}) {
    RequestError e = refusal(json{{"dimensions", c.value}}, 512, c.trained);
    EXPECT_EQ(e.status(), 400) << c.value.dump();
    EXPECT_EQ(e.param(), "dimensions") << c.value.dump();
    EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << c.value.dump() << ": " << e.what();
  }
}

TEST(EmbeddingDimensions, ManifestListIsCheckedAndSorted) {
  EXPECT_TRUE(matryoshka_dimensions(json{{"type", "clip"}}, "p.json", 512).empty());
  EXPECT_EQ(matryoshka_dimensions(json{{"matryoshka_dimensions", {256, 64}}}, "p.json", 512), (std::vector<size_t>{64, 256}));
  for (const json& bad : {json::array(), json{64, 0}, json{64, 64}, json{1024}, json{"64"}, json(64)}) {
    try {
      matryoshka_dimensions(json{{"matryoshka_dimensions", bad}}, "p.json", 512);
      ADD_FAILURE() << bad.dump() << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("p.json: matryoshka_dimensions", 0), 0u) << e.what();
    }
  }
}

TEST(EmbeddingDimensions, ShortenedVectorIsThePrefixAtUnitLength) {
  std::vector<float> v = {3, 4, 12, 0};  // |(3, 4)| = 5
  std::vector<float> s = shorten_embedding(v, 2);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_FLOAT_EQ(s[0], 0.6f);
  EXPECT_FLOAT_EQ(s[1], 0.8f);
  std::vector<float> zero = shorten_embedding(std::vector<float>{0, 0, 1}, 2);
  EXPECT_EQ(zero, (std::vector<float>{0, 0}));  // no NaN from a zero prefix
}

}  // namespace
}  // namespace mminfer::serve
