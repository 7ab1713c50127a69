// Request inputs for the load generator. A cache keyed by the SHA-256 of the raw bytes would
// answer every repeat of a file from memory, so the generator sends byte-level variants: the
// same picture or sound with a counter where decoders skip it (a PNG tEXt chunk, a JPEG COM
// segment, an unknown WAV chunk).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "serve/base64.h"

namespace mminfer::serve {

// The media type from magic bytes (image/png, image/jpeg, image/gif, image/webp, image/bmp,
// audio/wav, audio/flac, audio/ogg, audio/mpeg), or fallback.
std::string sniff_media_type(std::string_view bytes, std::string_view fallback);

// "data:TYPE;base64,..." with the sniffed type.
std::string data_url(std::string_view bytes, std::string_view fallback_type);

// Whether file_variant can make distinct variants of these bytes (PNG, JPEG, WAV).
bool has_variants(std::string_view bytes);

// Variant n of a file: n == 0 is the file itself; other n give distinct bytes with the same
// decoded content. Formats without variants come back unchanged.
std::string file_variant(std::string_view bytes, uint64_t n);

// Variant n of a text: the text itself for n == 0, else the text and " (n)".
std::string text_variant(std::string_view text, uint64_t n);

}  // namespace mminfer::serve
