// The load generator against the in-test server: counts, the status breakdown, reconnects,
// connection failures, request bodies, repeats, and the JSON report.
#include "serve/loadgen.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "mminfer/status.h"
#include "serve/input_variants.h"
#include "test_http_server.h"

namespace mminfer::serve {
namespace {

using testing::TestHttpServer;
using testing::TestReply;
using testing::TestRequest;
using nlohmann::json;

const std::string kPng = std::string("\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR", 16) + std::string(17, '\1');
const std::string kWav = std::string("RIFF\x24\0\0\0WAVEfmt \x10\0\0\0", 20) + std::string(16, '\2') + "data" +
                         std::string("\0\0\0\0", 4);

LoadgenOptions options_for(const TestHttpServer& server) {
  LoadgenOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(server.port());
  o.duration_s = 0;
  o.error_backoff = std::chrono::milliseconds(1);
  o.images = {kPng};
  o.audios = {kWav};
  return o;
}

TEST(Loadgen, CountsEveryRequestByModalityAndStatus) {
  // Images are refused with 429, everything else succeeds.
  std::mutex mu;
  std::multiset<std::string> models;
  TestHttpServer server([&](const TestRequest& r) {
    json body = json::parse(r.body);
    std::lock_guard lk(mu);
    models.insert(body["model"].get<std::string>());
    bool image = body["input"].is_array() && body["input"][0].contains("image");
    return TestReply{r.target == "/v1/embeddings" ? (image ? 429 : 200) : 404};
  });
  LoadgenOptions o = options_for(server);
  o.mix = parse_mix("text:0.5,image:0.3,audio:0.2");
  o.concurrency = 4;
  o.max_requests = 300;
  o.model_image = "vision";
  LoadgenReport r = run_loadgen(o);

  const LoadTally& text = r.by_modality.at("text");
  const LoadTally& image = r.by_modality.at("image");
  const LoadTally& audio = r.by_modality.at("audio");
  EXPECT_EQ(r.total.requests(), 300u);
  EXPECT_EQ(server.requests(), 300u);
  EXPECT_EQ(server.connections(), 4u);  // one kept-alive connection per virtual user
  EXPECT_EQ(text.requests() + image.requests() + audio.requests(), 300u);
  EXPECT_EQ(text.status, (std::map<int, uint64_t>{{200, text.requests()}}));
  EXPECT_EQ(image.status, (std::map<int, uint64_t>{{429, image.requests()}}));
  EXPECT_EQ(audio.status, (std::map<int, uint64_t>{{200, audio.requests()}}));
  EXPECT_GT(image.requests(), 0u);
  EXPECT_GT(audio.requests(), 0u);
  EXPECT_EQ(text.ok_latencies_ms.size(), text.requests());
  EXPECT_TRUE(image.ok_latencies_ms.empty());  // latencies are of 2xx answers only
  EXPECT_EQ(r.total.ok(), text.requests() + audio.requests());
  EXPECT_TRUE(r.total.connection_errors.empty());
  EXPECT_EQ(models.count("clip"), text.requests());
  EXPECT_EQ(models.count("vision"), image.requests());
  EXPECT_EQ(models.count("audio"), audio.requests());

  json j = json::parse(format_json(r));
  EXPECT_EQ(j["total"]["requests"], 300);
  EXPECT_EQ(j["concurrency"], 4);
  EXPECT_EQ(j["modalities"]["image"]["status"]["429"], image.requests());
  EXPECT_EQ(j["modalities"]["image"]["ok"], 0);
  EXPECT_EQ(j["modalities"]["text"]["status"]["200"], text.requests());
  EXPECT_EQ(j["total"]["status"]["429"], image.requests());
  EXPECT_GT(j["modalities"]["text"]["latency_ms"]["p99"].get<double>(), 0.0);
  EXPECT_GE(j["modalities"]["text"]["latency_ms"]["p99"].get<double>(),
            j["modalities"]["text"]["latency_ms"]["p50"].get<double>());

  std::string table = format_table(r);
  EXPECT_NE(table.find("429:" + std::to_string(image.requests())), std::string::npos) << table;
  EXPECT_NE(table.find("total"), std::string::npos) << table;
}

TEST(Loadgen, ReconnectsWhenTheServerClosesConnections) {
  std::atomic<int> n{0};
  TestHttpServer server([&](const TestRequest&) {
    TestReply reply;
    reply.close = ++n % 3 == 0;
    return reply;
  });
  LoadgenOptions o = options_for(server);
  o.concurrency = 2;
  o.max_requests = 90;
  LoadgenReport r = run_loadgen(o);
  EXPECT_EQ(r.total.status, (std::map<int, uint64_t>{{200, 90}}));
  EXPECT_TRUE(r.total.connection_errors.empty());
  EXPECT_GE(server.connections(), 30u);
}

TEST(Loadgen, CountsConnectionFailuresWithoutThrowing) {
  LoadgenOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(testing::unused_port());
  o.duration_s = 0;
  o.max_requests = 6;
  o.concurrency = 3;
  o.error_backoff = std::chrono::milliseconds(1);
  LoadgenReport r = run_loadgen(o);
  EXPECT_EQ(r.total.requests(), 6u);
  EXPECT_EQ(r.total.connection_errors, (std::map<std::string, uint64_t>{{"refused", 6}}));
  EXPECT_EQ(r.total.ok(), 0u);
  json j = json::parse(format_json(r));
  EXPECT_EQ(j["total"]["connection_errors"]["refused"], 6);
  EXPECT_NE(format_table(r).find("refused:6"), std::string::npos);
}

TEST(Loadgen, StopsAtTheDuration) {
  TestHttpServer server([](const TestRequest&) { return TestReply{}; });
  LoadgenOptions o = options_for(server);
  o.duration_s = 0.2;
  o.concurrency = 2;
  LoadgenReport r = run_loadgen(o);
  EXPECT_GT(r.total.requests(), 0u);
  EXPECT_EQ(r.total.requests(), server.requests());
  EXPECT_GE(r.elapsed_s, 0.2);
}

TEST(Loadgen, FreshInputsNeverRepeatUnlessAsked) {
  for (double fraction : {0.0, 0.5}) {
    std::mutex mu;
    std::vector<std::string> bodies;
    TestHttpServer server([&](const TestRequest& r) {
      std::lock_guard lk(mu);
      bodies.push_back(r.body);
      return TestReply{};
    });
    LoadgenOptions o = options_for(server);
    o.mix = parse_mix("text:1,image:1");
    o.max_requests = 200;
    o.repeat_fraction = fraction;
    run_loadgen(o);
    ASSERT_EQ(bodies.size(), 200u);
    size_t distinct = std::set<std::string>(bodies.begin(), bodies.end()).size();
    if (fraction == 0) {
      EXPECT_EQ(distinct, 200u);
    } else {
      EXPECT_GT(distinct, 60u);  // about half repeat (binomial, sd ~7)
      EXPECT_LT(distinct, 140u);
    }
  }
}

// Runs against one server must not answer each other from its cache: by default each run
// numbers its fresh inputs from a random start, which the report gives, and a run given that
// start sends the same inputs again.
TEST(Loadgen, RunsSendDifferentInputsUnlessGivenTheFirstOne) {
  auto bodies_of = [](std::optional<uint64_t> first, uint64_t* used) {
    std::mutex mu;
    std::set<std::string> bodies;
    TestHttpServer server([&](const TestRequest& r) {
      std::lock_guard lk(mu);
      bodies.insert(r.body);
      return TestReply{};
    });
    LoadgenOptions o = options_for(server);
    o.mix = parse_mix("text:1,image:1");
    o.max_requests = 40;
    o.first_input = first;
    LoadgenReport r = run_loadgen(o);
    *used = r.first_input;
    EXPECT_EQ(json::parse(format_json(r))["first_input"], r.first_input);
    return bodies;
  };
  uint64_t first_a = 0, first_b = 0, first_c = 0;
  std::set<std::string> a = bodies_of(std::nullopt, &first_a), b = bodies_of(std::nullopt, &first_b);
  EXPECT_NE(first_a, first_b);
  std::vector<std::string> common;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(common));
  EXPECT_TRUE(common.empty()) << common.size() << " inputs sent by both runs";
  EXPECT_EQ(bodies_of(first_a, &first_c), a);
  EXPECT_EQ(first_c, first_a);
}

TEST(Loadgen, RequestBodies) {
  LoadgenOptions o;
  o.images = {kPng};
  o.audios = {kWav};
  json text = json::parse(embedding_request_body(o, Modality::kText, 0));
  EXPECT_EQ(text, (json{{"model", "clip"}, {"input", builtin_texts()[0]}}));
  const size_t n = builtin_texts().size();
  EXPECT_EQ(json::parse(embedding_request_body(o, Modality::kText, n + 1))["input"], builtin_texts()[1] + " (1)");

  json image = json::parse(embedding_request_body(o, Modality::kImage, 0));
  EXPECT_EQ(image["model"], "clip");
  EXPECT_EQ(image["input"][0]["image"], "data:image/png;base64," + base64_encode(kPng));
  json image1 = json::parse(embedding_request_body(o, Modality::kImage, 1));
  EXPECT_EQ(image1["input"][0]["image"], "data:image/png;base64," + base64_encode(file_variant(kPng, 1)));

  o.model_audio = "whisper-enc";
  json audio = json::parse(embedding_request_body(o, Modality::kAudio, 0));
  EXPECT_EQ(audio, (json{{"model", "whisper-enc"}, {"input", json::array({{{"audio", "data:audio/wav;base64," + base64_encode(kWav)}}})}}));

  o.texts = {"only this"};
  EXPECT_EQ(json::parse(embedding_request_body(o, Modality::kText, 2))["input"], "only this (2)");
}

TEST(Loadgen, ParsesMixAndUrl) {
  std::vector<MixEntry> mix = parse_mix("text:0.5,image:0.25,audio");
  ASSERT_EQ(mix.size(), 3u);
  EXPECT_EQ(mix[1].modality, Modality::kImage);
  EXPECT_EQ(mix[1].weight, 0.25);
  EXPECT_EQ(mix[2].weight, 1);
  EXPECT_THROW(parse_mix("video:1"), Error);
  EXPECT_THROW(parse_mix("text:-1"), Error);
  EXPECT_THROW(parse_mix("text:0"), Error);
  EXPECT_THROW(parse_mix("text:1,text:2"), Error);
  EXPECT_THROW(parse_mix("text:1,"), Error);

  HttpTarget t = parse_http_url("http://localhost:8080/api/");
  EXPECT_EQ(t.host, "localhost");
  EXPECT_EQ(t.port, "8080");
  EXPECT_EQ(t.base_path, "/api");
  t = parse_http_url("http://[::1]:9000");
  EXPECT_EQ(t.host, "::1");
  EXPECT_EQ(t.port, "9000");
  EXPECT_EQ(t.base_path, "");
  EXPECT_EQ(parse_http_url("http://example.org").port, "80");
  EXPECT_THROW(parse_http_url("https://example.org"), Error);
  EXPECT_THROW(parse_http_url("ftp://example.org"), Error);
  EXPECT_THROW(parse_http_url("http://:80"), Error);
  EXPECT_THROW(parse_http_url("http://h:99999"), Error);
  EXPECT_THROW(parse_http_url("http://h:80/x?y=1"), Error);
}

TEST(Loadgen, RefusesOptionsThatCannotRun) {
  LoadgenOptions o;
  o.url = "http://127.0.0.1:1";
  o.mix = parse_mix("image:1");
  EXPECT_THROW(run_loadgen(o), Error);  // no images
  o.mix = parse_mix("audio:1");
  EXPECT_THROW(run_loadgen(o), Error);  // no audio
  o.mix = parse_mix("text:1");
  o.duration_s = 0;
  EXPECT_THROW(run_loadgen(o), Error);  // neither a duration nor a request count
  o.max_requests = 1;
  o.repeat_fraction = 1.5;
  EXPECT_THROW(run_loadgen(o), Error);
}

TEST(Percentile, NearestRank) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  EXPECT_EQ(percentile(v, 50), 50);
  EXPECT_EQ(percentile(v, 90), 90);
  EXPECT_EQ(percentile(v, 99), 99);
  EXPECT_EQ(percentile(v, 100), 100);
  EXPECT_EQ(percentile(v, 0), 1);
  std::vector<double> one{7};
  EXPECT_EQ(percentile(one, 99), 7);
  std::vector<double> none;
  EXPECT_EQ(percentile(none, 50), 0);
}

}  // namespace
}  // namespace mminfer::serve
