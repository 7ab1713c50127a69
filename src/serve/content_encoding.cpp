#include "serve/content_encoding.h"

#include <vector>

#include <zlib.h>

#include "serve/header_list.h"

namespace mminfer::serve {

namespace {

// Inflates `in` with zlib's window bits `bits` (31: gzip, 15: zlib, -15: raw deflate). Stops
// with 413 as soon as the output would pass max_bytes.
DecodedBody inflate_into(const std::string& in, int bits, size_t max_bytes, std::string& out, const std::string& name) {
  z_stream z{};
  if (inflateInit2(&z, bits) != Z_OK) return {500, "cannot start zlib"};
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  out.clear();
  char chunk[64 * 1024];
  int rc = Z_OK;
  DecodedBody result;
  while (rc != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(chunk);
    z.avail_out = sizeof chunk;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      bool truncated = rc == Z_BUF_ERROR;  // no progress possible: the input ended early
      result = {400, "the " + name + " body is not valid " + name + " data: " +
                         (truncated ? std::string("it ends early") : std::string(z.msg ? z.msg : "corrupt stream"))};
      break;
    }
    size_t produced = sizeof chunk - z.avail_out;
    if (out.size() + produced > max_bytes) {
      result = {413, "the " + name + " body inflates to more than the limit of " + std::to_string(max_bytes) + " bytes"};
      break;
    }
    out.append(chunk, produced);
  }
  if (result.status == 200 && z.avail_in != 0) result = {400, "the " + name + " body has bytes after the end of its stream"};
  inflateEnd(&z);
  return result;
}

}  // namespace

DecodedBody decode_content_encoding(std::string_view encoding, std::string& body, size_t max_bytes) {
  std::vector<std::string> codings;
  for (std::string& c : header_list_names(encoding))
    if (!c.empty() && c != "identity") codings.push_back(std::move(c));
  if (codings.size() > 4) return {415, "more than 4 content codings"};
  for (auto it = codings.rbegin(); it != codings.rend(); ++it) {  // the last applied is undone first
    std::string out;
    DecodedBody r;
    if (*it == "gzip" || *it == "x-gzip") {
      r = inflate_into(body, 15 + 16, max_bytes, out, "gzip");
    } else if (*it == "deflate") {
      // RFC 9110 deflate is zlib-wrapped; some clients send raw deflate: its first byte tells.
      bool zlib_header = body.size() >= 2 && (static_cast<unsigned char>(body[0]) & 0x0F) == 8 &&
                         ((static_cast<unsigned char>(body[0]) << 8) | static_cast<unsigned char>(body[1])) % 31 == 0;
      r = inflate_into(body, zlib_header ? 15 : -15, max_bytes, out, "deflate");
    } else {
      return {415, "Content-Encoding '" + *it + "' is not supported (gzip, deflate or identity)"};
    }
    if (r.status != 200) return r;
    body = std::move(out);
  }
  return {};
}

}  // namespace mminfer::serve
