// The endpoint label of request metrics: route templates only, whatever the path holds.
#include "serve/route_labels.h"

#include <gtest/gtest.h>

namespace mminfer::serve {
namespace {

RouteLabels of(std::vector<std::string> parts) { return route_labels(parts); }

TEST(RouteLabels, KnownRoutesAreTheirTemplates) {
  EXPECT_EQ(of({}).endpoint, "/");
  EXPECT_EQ(of({"metrics"}).endpoint, "/metrics");
  EXPECT_EQ(of({"v1", "embeddings"}).endpoint, "/v1/embeddings");
  EXPECT_EQ(of({"v1", "models", "clip"}).endpoint, "/v1/models/{model}");
  EXPECT_EQ(of({"v2"}).endpoint, "/v2");
  EXPECT_EQ(of({"v2", "health", "ready"}).endpoint, "/v2/health/ready");
  EXPECT_EQ(of({"v2", "repository", "index"}).endpoint, "/v2/repository/index");
  RouteLabels load = of({"v2", "repository", "models", "tiny", "load"});
  EXPECT_EQ(load.endpoint, "/v2/repository/models/{model}/load");
  EXPECT_EQ(load.model, "tiny");
  RouteLabels infer = of({"v2", "models", "clip", "versions", "2", "infer"});
  EXPECT_EQ(infer.endpoint, "/v2/models/{model}/versions/{version}/infer");
  EXPECT_EQ(infer.model, "clip");
  EXPECT_EQ(of({"v2", "models", "clip"}).endpoint, "/v2/models/{model}");
  EXPECT_EQ(of({"v2", "models", "clip", "ready"}).endpoint, "/v2/models/{model}/ready");
  EXPECT_EQ(of({"v2", "models", "clip"}).model, "clip");
  EXPECT_EQ(of({"v1", "embeddings"}).model, "");
}

TEST(RouteLabels, EverythingElseIsOneValue) {
  for (const auto& parts : std::vector<std::vector<std::string>>{
           {"zz"}, {"v1", "zz"}, {"v1", "embeddings", "x"}, {"v2", "models", "aa", "bb"}, {"v2", "zz"},
           {"v2", "health", "zz"}, {"v2", "models", "m", "versions", "1", "x"}, {"metrics", "x"}, {"\xff\xfe"},
           {"v2", "repository", "models", "m", "zap"}, {"v2", "models", "m", "infer", "x"}}) {
    RouteLabels l = of(parts);
    EXPECT_EQ(l.endpoint, kUnmatchedEndpoint) << parts.back();
    EXPECT_EQ(l.model, "") << parts.back();
  }
}

}  // namespace
}  // namespace mminfer::serve
