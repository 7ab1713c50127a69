// What a request's Cache-Control and Pragma headers ask of the result cache (RFC 9111 §5.2.1,
// §5.4): directives are case-insensitive and come as a comma-separated list, possibly over
// several header lines.
#pragma once
#include "serve/http_server.h"

namespace mminfer::serve {

struct CacheDirectives {
  bool no_cache = false;  // compute afresh (no-cache, Pragma: no-cache); the result may be stored
  bool no_store = false;  // store nothing from this request; a cached answer may still be used
};

CacheDirectives cache_directives(const HttpRequest& req);

}  // namespace mminfer::serve
