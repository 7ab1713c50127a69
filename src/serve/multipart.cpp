#include "serve/multipart.h"

#include <algorithm>

#include "core/ascii.h"
#include "mminfer/status.h"

namespace mminfer::serve {

namespace {


// The value of `key` among a header's `; key=value` parameters (quoted or not; a quoted value may
// hold ';'), nullopt when absent.
std::optional<std::string> parameter(std::string_view header, std::string_view key) {
  size_t i = header.find(';');
  while (i != std::string_view::npos && i < header.size()) {
    ++i;  // past ';'
    size_t eq = header.find('=', i);
    size_t semi = header.find(';', i);
    if (eq == std::string_view::npos) return std::nullopt;
    if (semi != std::string_view::npos && semi < eq) {  // a parameter without a value
      i = semi;
      continue;
    }
    const std::string name = ascii_lower(trim(header.substr(i, eq - i)));
    size_t v = eq + 1;
    while (v < header.size() && (header[v] == ' ' || header[v] == '\t')) ++v;
    std::string value;
    if (v < header.size() && header[v] == '"') {
      for (++v; v < header.size() && header[v] != '"'; ++v) {
        if (header[v] == '\\' && v + 1 < header.size()) ++v;
        value += header[v];
      }
      i = header.find(';', v);
    } else {
      i = header.find(';', v);
      value = std::string(trim(header.substr(v, i == std::string_view::npos ? std::string_view::npos : i - v)));
    }
    if (name == key) return value;
  }
  return std::nullopt;
}

}  // namespace

std::vector<FormPart> parse_multipart(std::string_view content_type, std::string_view body) {
  if (ascii_lower(trim(content_type.substr(0, content_type.find(';')))) != "multipart/form-data")
    throw Error("the request must be multipart/form-data (a form with the file), not '" +
                std::string(trim(content_type.substr(0, 80))) + "'");
  std::optional<std::string> boundary = parameter(content_type, "boundary");
  if (!boundary || boundary->empty() || boundary->size() > 200)
    throw Error("the multipart/form-data Content-Type has no boundary");
  const std::string delimiter = "--" + *boundary;
  std::vector<FormPart> parts;
  size_t at = body.find(delimiter);
  if (at == std::string_view::npos) throw Error("the form has no part: its boundary never appears in the body");
  for (;;) {
    at += delimiter.size();
    if (body.substr(at, 2) == "--") return parts;  // the closing delimiter
    if (body.substr(at, 2) != "\r\n") throw Error("the form's boundary line is malformed");
    at += 2;
    const size_t headers_end = body.find("\r\n\r\n", at);
    if (headers_end == std::string_view::npos || headers_end - at > 16384)
      throw Error("a part of the form has no end to its headers (or headers over 16 KiB)");
    FormPart part;
    bool form_data = false;
    std::string_view headers = body.substr(at, headers_end - at);
    while (!headers.empty()) {
      size_t eol = headers.find("\r\n");
      std::string_view line = headers.substr(0, eol);
      headers = eol == std::string_view::npos ? std::string_view() : headers.substr(eol + 2);
      size_t colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      const std::string name = ascii_lower(trim(line.substr(0, colon)));
      std::string_view value = trim(line.substr(colon + 1));
      if (name == "content-disposition") {
        form_data = ascii_lower(trim(value.substr(0, value.find(';')))) == "form-data";
        if (auto n = parameter(value, "name")) part.name = *n;
        part.filename = parameter(value, "filename");
      } else if (name == "content-type") {
        part.content_type = std::string(value);
      }
    }
    if (!form_data || part.name.empty()) throw Error("a part of the form lacks Content-Disposition: form-data with a name");
    const size_t start = headers_end + 4;
    const size_t end = body.find("\r\n" + delimiter, start);
    if (end == std::string_view::npos) throw Error("the form ends before its closing boundary (truncated upload?)");
    part.body = body.substr(start, end - start);
    parts.push_back(std::move(part));
    at = end + 2;
  }
}

const FormPart* find_part(const std::vector<FormPart>& parts, std::string_view name) {
  for (const FormPart& p : parts)
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace mminfer::serve
