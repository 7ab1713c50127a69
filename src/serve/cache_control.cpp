#include "serve/cache_control.h"

#include "serve/header_list.h"

namespace mminfer::serve {

CacheDirectives cache_directives(const HttpRequest& req) {
  CacheDirectives d;
  for (const auto& [name, value] : req.headers) {
    if (name == "cache-control") {
      for (const std::string& directive : header_list_names(value)) {
        if (directive == "no-cache") d.no_cache = true;
        if (directive == "no-store") d.no_store = true;
      }
    } else if (name == "pragma") {
      // HTTP/1.0's form; RFC 9111 §5.4 has caches honour it as no-cache.
      for (const std::string& directive : header_list_names(value))
        if (directive == "no-cache") d.no_cache = true;
    }
  }
  return d;
}

}  // namespace mminfer::serve
