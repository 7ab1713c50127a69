#include "serve/openai_error.h"

#include <nlohmann/json.hpp>

namespace mminfer::serve {

const char* openai_error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 409: return "conflict_error";
    case 429: return "rate_limit_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

namespace {

const char* usual_code(int status) {
  switch (status) {
    case 404: return "not_found";
    case 405: return "method_not_allowed";
    case 408: return "request_timeout";
    case 413: return "request_too_large";
    case 429: return "rate_limit_exceeded";
    case 503: return "service_unavailable";
    default: return "";
  }
}

nlohmann::json or_null(const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); }

}  // namespace

HttpResponse openai_error(int status, const std::string& message, const std::string& param, const std::string& code) {
  HttpResponse r;
  r.status = status;
  nlohmann::json e = {{"message", message},
                      {"type", openai_error_type(status)},
                      {"param", or_null(param)},
                      {"code", or_null(code.empty() ? usual_code(status) : code)}};
  r.body = nlohmann::json{{"error", e}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (status == 429 || status == 503) r.headers.emplace_back("Retry-After", "1");
  return r;
}

void to_openai_envelope(HttpResponse& response) {
  if (response.status < 400) return;
  nlohmann::json j = nlohmann::json::parse(response.body, nullptr, false);
  if (!j.is_object() || !j.contains("error") || !j["error"].is_string()) return;
  HttpResponse r = openai_error(response.status, j["error"].get<std::string>());
  response.content_type = r.content_type;
  response.body = std::move(r.body);
  // Headers already set (Retry-After, ...) stay as they were.
}

}  // namespace mminfer::serve
