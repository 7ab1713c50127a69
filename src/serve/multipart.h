// multipart/form-data bodies (RFC 7578), as OpenAI's clients send a file upload: the boundary
// from the Content-Type header, then each part's name, filename, content type and bytes.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mminfer::serve {

struct FormPart {
  std::string name;
  std::optional<std::string> filename;  // set for a file part
  std::string content_type;             // "" when the part gives none
  std::string_view body;                // into the body given to parse_multipart
};

// Throws Error with a one-line reason for a content type that is not multipart/form-data with a
// boundary, or a body that does not follow it (no closing delimiter, a part without
// Content-Disposition form-data and a name, headers over 16 KiB).
std::vector<FormPart> parse_multipart(std::string_view content_type, std::string_view body);

// The first part named `name`, or null.
const FormPart* find_part(const std::vector<FormPart>& parts, std::string_view name);

}  // namespace mminfer::serve
