#include "serve/header_list.h"

#include <algorithm>

#include "core/ascii.h"
namespace mminfer::serve {

namespace {

std::string lower_trimmed(std::string_view s) { return ascii_lower(trim(s, " \t")); }

}  // namespace

std::vector<std::string> header_list_names(std::string_view value) {
  std::vector<std::string> names;
  size_t i = 0;
  while (i < value.size()) {
    size_t end = i;
    bool quoted = false;
    while (end < value.size() && (quoted || value[end] != ',')) {
      if (value[end] == '"') quoted = !quoted;
      else if (quoted && value[end] == '\\') ++end;
      ++end;
    }
    std::string_view item = value.substr(i, std::min(end, value.size()) - i);
    names.push_back(lower_trimmed(item.substr(0, item.find('='))));
    i = end + 1;
  }
  return names;
}

}  // namespace mminfer::serve
