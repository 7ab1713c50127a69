// OpenAI's error envelope: the fields the official clients read, and the rewrite of the KServe
// shape that the shared paths answer /v1 with.
#include "serve/openai_error.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace mminfer::serve {
namespace {

nlohmann::json error_of(const HttpResponse& r) { return nlohmann::json::parse(r.body).at("error"); }

TEST(OpenAIError, EnvelopeHoldsMessageTypeParamAndCode) {
  HttpResponse r = openai_error(400, "'dimensions' must be at least 1", "dimensions", "invalid_value");
  EXPECT_EQ(r.status, 400);
  nlohmann::json e = error_of(r);
  EXPECT_EQ(e["message"], "'dimensions' must be at least 1");
  EXPECT_EQ(e["type"], "invalid_request_error");
  EXPECT_EQ(e["param"], "dimensions");
  EXPECT_EQ(e["code"], "invalid_value");
}

TEST(OpenAIError, EmptyParamAndCodeAreNull) {
  nlohmann::json e = error_of(openai_error(400, "bad"));
  EXPECT_TRUE(e["param"].is_null());
  EXPECT_TRUE(e["code"].is_null());
}

TEST(OpenAIError, TypeFollowsStatus) {
  EXPECT_STREQ(openai_error_type(400), "invalid_request_error");
  EXPECT_STREQ(openai_error_type(401), "authentication_error");
  EXPECT_STREQ(openai_error_type(403), "permission_error");
  EXPECT_STREQ(openai_error_type(404), "not_found_error");
  EXPECT_STREQ(openai_error_type(413), "invalid_request_error");
  EXPECT_STREQ(openai_error_type(429), "rate_limit_error");
  EXPECT_STREQ(openai_error_type(500), "server_error");
  EXPECT_STREQ(openai_error_type(503), "server_error");
}

TEST(OpenAIError, QueueRefusalsSayWhenToRetry) {
  for (int status : {429, 503}) {
    HttpResponse r = openai_error(status, "full");
    ASSERT_EQ(r.headers.size(), 1u) << status;
    EXPECT_EQ(r.headers[0].first, "Retry-After");
    EXPECT_EQ(error_of(r)["code"], status == 429 ? "rate_limit_exceeded" : "service_unavailable");
  }
}

TEST(OpenAIError, RewritesTheKServeShapeKeepingStatusAndHeaders) {
  HttpResponse r{429, "application/json", R"({"error": "the queue of model 'x' is full"})", {{"Retry-After", "1"}}};
  to_openai_envelope(r);
  EXPECT_EQ(r.status, 429);
  ASSERT_EQ(r.headers.size(), 1u);
  nlohmann::json e = error_of(r);
  EXPECT_EQ(e["message"], "the queue of model 'x' is full");
  EXPECT_EQ(e["type"], "rate_limit_error");
}

TEST(OpenAIError, LeavesSuccessesAndEnvelopesAlone) {
  HttpResponse ok{200, "application/json", R"({"error": "a field named error in a result"})", {}};
  to_openai_envelope(ok);
  EXPECT_EQ(ok.body, R"({"error": "a field named error in a result"})");
  HttpResponse env = openai_error(404, "no model", "model", "model_not_found");
  std::string before = env.body;
  to_openai_envelope(env);
  EXPECT_EQ(env.body, before);
  HttpResponse text{500, "text/plain", "not json", {}};
  to_openai_envelope(text);
  EXPECT_EQ(text.body, "not json");
}

}  // namespace
}  // namespace mminfer::serve
