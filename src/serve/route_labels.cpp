#include "serve/route_labels.h"

#include <string_view>

namespace mminfer::serve {

namespace {

bool one_of(const std::string& s, std::initializer_list<std::string_view> options) {
  for (std::string_view o : options)
    if (s == o) return true;
  return false;
}

// /v2/models/{m}[/versions/{v}][/action]
RouteLabels model_route(const std::vector<std::string>& p) {
  std::string endpoint = "/v2/models/{model}";
  size_t at = 3;
  if (p.size() >= 5 && p[3] == "versions") {
    endpoint += "/versions/{version}";
    at = 5;
  }
  if (p.size() == at) return {endpoint, p[2]};
  if (p.size() == at + 1 && one_of(p[at], {"ready", "infer", "config", "stats", "generate", "generate_stream"})) return {endpoint + "/" + p[at], p[2]};
  return {kUnmatchedEndpoint, ""};
}

}  // namespace

RouteLabels route_labels(const std::vector<std::string>& p) {
  const RouteLabels unmatched{kUnmatchedEndpoint, ""};
  if (p.empty()) return {"/", ""};
  if (p.size() == 1 && p[0] == "metrics") return {"/metrics", ""};
  if (p[0] == "v1") {
    if (p.size() == 2 && one_of(p[1], {"embeddings", "ocr", "classify", "models", "completions"})) return {"/v1/" + p[1], ""};
    if (p.size() == 3 && p[1] == "chat" && p[2] == "completions") return {"/v1/chat/completions", ""};
    if (p.size() == 3 && p[1] == "audio" && p[2] == "transcriptions") return {"/v1/audio/transcriptions", ""};
    if (p.size() == 3 && p[1] == "models") return {"/v1/models/{model}", p[2]};
    return unmatched;
  }
  if (p[0] != "v2") return unmatched;
  if (p.size() == 1) return {"/v2", ""};
  if (p.size() == 3 && p[1] == "health" && one_of(p[2], {"live", "ready"})) return {"/v2/health/" + p[2], ""};
  if (p.size() == 3 && p[1] == "repository" && p[2] == "index") return {"/v2/repository/index", ""};
  if (p.size() == 5 && p[1] == "repository" && p[2] == "models" && one_of(p[4], {"load", "unload"}))
    return {"/v2/repository/models/{model}/" + p[4], p[3]};
  if (p.size() >= 3 && p[1] == "models") return model_route(p);
  return unmatched;
}

}  // namespace mminfer::serve
