// OpenAI's error envelope, which the official clients read into err.status, err.type,
// err.code and err.param:
//   {"error": {"message": "...", "type": "invalid_request_error", "param": "model", "code": null}}
// Every answer on /v1 that is an error has this shape; /v2 keeps KServe's {"error": "text"}.
#pragma once
#include <string>

#include "mminfer/status.h"
#include "serve/http_server.h"

namespace mminfer::serve {

// Thrown by request handlers for a refusal with its own status and, on /v1, the parameter at
// fault and a machine-readable code (either may be empty: JSON null).
class RequestError : public Error {
 public:
  RequestError(int status, const std::string& message, std::string param = "", std::string code = "")
      : Error(message), status_(status), param_(std::move(param)), code_(std::move(code)) {}
  int status() const { return status_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }

 private:
  int status_;
  std::string param_, code_;
};

// "invalid_request_error" (400, 405, 413...), "authentication_error" (401), "permission_error"
// (403), "not_found_error" (404), "rate_limit_error" (429), "server_error" (500, 503...).
const char* openai_error_type(int status);

// The envelope with that status; an empty param or code is written as null, and an empty code
// takes the status's usual one (429 rate_limit_exceeded, 503 service_unavailable, ...), if any.
HttpResponse openai_error(int status, const std::string& message, const std::string& param = "",
                          const std::string& code = "");

// An error answer in KServe's shape ({"error": "text"}, what the routes and the HTTP layer
// share) rewritten into the envelope with the same status and headers; anything else is left
// as it is.
void to_openai_envelope(HttpResponse& response);

}  // namespace mminfer::serve
