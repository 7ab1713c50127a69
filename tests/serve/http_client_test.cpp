// HttpClient against the in-test server: keep-alive reuse, reconnects, errors by kind.
#include "serve/http_client.h"

#include <gtest/gtest.h>

#include "test_http_server.h"

namespace mminfer::serve {
namespace {

using testing::TestHttpServer;
using testing::TestReply;
using testing::TestRequest;
using namespace std::chrono_literals;

TEST(HttpClient, ReusesOneConnection) {
  TestHttpServer server([](const TestRequest& r) { return TestReply{200, r.method + " " + r.target + " " + r.body}; });
  HttpClient client("127.0.0.1", std::to_string(server.port()), 5s);
  for (int i = 0; i < 10; ++i) {
    HttpResult r = client.post("/v1/x", "body" + std::to_string(i), "application/json");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "POST /v1/x body" + std::to_string(i));
  }
  EXPECT_EQ(client.get("/health").body, "GET /health ");
  EXPECT_EQ(client.connections_opened(), 1u);
  EXPECT_EQ(server.connections(), 1u);
}

TEST(HttpClient, ReconnectsAfterConnectionClose) {
  TestHttpServer server([](const TestRequest&) { return TestReply{503, "busy", /*close=*/true}; });
  HttpClient client("127.0.0.1", std::to_string(server.port()), 5s);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(client.post("/", "", "text/plain").status, 503);
  EXPECT_EQ(client.connections_opened(), 3u);
}

TEST(HttpClient, RetriesOnceWhenAKeptConnectionWasDropped) {
  TestReply drop;
  drop.drop_after = true;  // the server closes without saying so, like an idle timeout
  TestHttpServer server([&](const TestRequest&) { return drop; });
  HttpClient client("127.0.0.1", std::to_string(server.port()), 5s);
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(10ms);  // let the close arrive before the next request
    EXPECT_EQ(client.post("/", "x", "text/plain").status, 200);
  }
  EXPECT_EQ(client.connections_opened(), 4u);
  EXPECT_EQ(server.requests(), 4u);
}

TEST(HttpClient, ConnectionErrorsSayWhatKind) {
  HttpClient refused("127.0.0.1", std::to_string(testing::unused_port()), 5s);
  try {
    refused.post("/", "", "text/plain");
    FAIL() << "no error";
  } catch (const HttpConnectionError& e) {
    EXPECT_EQ(e.kind(), "refused");
  }
  TestReply slow;
  slow.delay_ms = 400;
  TestHttpServer server([&](const TestRequest&) { return slow; });
  HttpClient impatient("127.0.0.1", std::to_string(server.port()), 100ms);
  try {
    impatient.post("/", "", "text/plain");
    FAIL() << "no error";
  } catch (const HttpConnectionError& e) {
    EXPECT_EQ(e.kind(), "timeout");
  }
  HttpClient nowhere("no-such-host.invalid", "80", 2s);
  try {
    nowhere.get("/");
    FAIL() << "no error";
  } catch (const HttpConnectionError& e) {
    EXPECT_EQ(e.kind(), "resolve");
  }
}

TEST(HttpClient, StreamedPostHandsTheBodyOverInPiecesAndKeepsErrorsWhole) {
  const std::string big(100000, 'e');
  TestHttpServer server([&](const TestRequest& r) {
    return r.target == "/bad" ? TestReply{400, "{\"error\": \"no\"}"} : TestReply{200, big + r.body};
  });
  HttpClient client("127.0.0.1", std::to_string(server.port()), 5s);
  std::string got;
  size_t pieces = 0;
  HttpResult r = client.post_streamed("/x", "tail", "application/json", [&](std::string_view p) { got += p, ++pieces; });
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.body.empty());
  EXPECT_EQ(got, big + "tail");
  EXPECT_GT(pieces, 1u);  // larger than one read
  got.clear();
  r = client.post_streamed("/bad", "", "application/json", [&](std::string_view p) { got += p; });
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body, "{\"error\": \"no\"}");
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(client.post("/x", "again", "text/plain").body, big + "again");  // the connection is still good
  EXPECT_EQ(client.connections_opened(), 1u);
}

}  // namespace
}  // namespace mminfer::serve
