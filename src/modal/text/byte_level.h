// GPT-2's byte-level alphabet: every byte maps to one printable code point (printable Latin-1
// bytes to themselves, the rest to U+0100 onwards), so BPE vocabularies can hold any byte
// string as text and never need an unknown token.
#pragma once
#include <string>
#include <string_view>

namespace mminfer::text {

std::string to_byte_level(std::string_view bytes);
// Inverse of to_byte_level; code points outside the alphabet pass through as their UTF-8.
std::string from_byte_level(std::string_view chars);

}  // namespace mminfer::text
