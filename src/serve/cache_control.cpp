#include "serve/cache_control.h"

#include <cctype>
#include <string>
#include <string_view>

namespace mminfer::serve {

namespace {

std::string lower_trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Calls f with each directive's name, in lower case, of a comma-separated list. Arguments
// (name=value, possibly a quoted string holding commas) are skipped.
template <class F>
void each_directive(std::string_view list, F f) {
  size_t i = 0;
  while (i < list.size()) {
    size_t end = i;
    bool quoted = false;
    while (end < list.size() && (quoted || list[end] != ',')) {
      if (list[end] == '"') quoted = !quoted;
      else if (quoted && list[end] == '\\') ++end;
      ++end;
    }
    std::string_view item = list.substr(i, std::min(end, list.size()) - i);
    f(lower_trimmed(item.substr(0, item.find('='))));
    i = end + 1;
  }
}

}  // namespace

CacheDirectives cache_directives(const HttpRequest& req) {
  CacheDirectives d;
  for (const auto& [name, value] : req.headers) {
    if (name == "cache-control") {
      each_directive(value, [&](const std::string& directive) {
        if (directive == "no-cache") d.no_cache = true;
        if (directive == "no-store") d.no_store = true;
      });
    } else if (name == "pragma") {
      // HTTP/1.0's form; RFC 9111 §5.4 has caches honour it as no-cache.
      each_directive(value, [&](const std::string& directive) {
        if (directive == "no-cache") d.no_cache = true;
      });
    }
  }
  return d;
}

}  // namespace mminfer::serve
