// Request bodies sent with Content-Encoding: gzip or deflate (RFC 9110 section 8.4), inflated
// before any route sees them. The inflated size is bounded by the same limit as a plain body,
// checked while inflating: a zip bomb costs at most that limit, never more.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace mminfer::serve {

struct DecodedBody {
  int status = 200;    // 200 decoded (or nothing to decode); 400, 413 or 415 with `error`
  std::string error;
};

// Replaces `body` by its decoded form when `encoding` (the header's value) names gzip,
// x-gzip or deflate (zlib-wrapped, or raw as some clients send it); "" and "identity" leave
// it as it is. Codings may be listed ("gzip, identity") and are undone last first.
DecodedBody decode_content_encoding(std::string_view encoding, std::string& body, size_t max_bytes);

}  // namespace mminfer::serve
