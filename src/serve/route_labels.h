// What a request is counted under in /metrics: the route template it matched ("/v2/models/{model}/infer"),
// never the raw path, so hostile paths cannot grow the label set; and the model the path names.
#pragma once
#include <string>
#include <vector>

namespace mminfer::serve {

inline constexpr const char* kUnmatchedEndpoint = "unmatched";

struct RouteLabels {
  std::string endpoint;  // a route template, or kUnmatchedEndpoint
  std::string model;     // the {model} segment of the path as sent, "" when the route names none
};

// parts: the path split at '/', empty segments dropped.
RouteLabels route_labels(const std::vector<std::string>& parts);

}  // namespace mminfer::serve
