// UTF-8 and Unicode helpers for the tokenizers. Character classes follow the Rust `char`
// methods that Hugging Face tokenizers use, so our normalizers and pre-tokenizers split text
// where theirs do. Properties and normalization forms come from utf8proc.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mminfer::text {

// Decodes the code point at `pos` of valid UTF-8 and moves `pos` past it.
char32_t next_code_point(std::string_view s, size_t& pos);
void append_utf8(std::string& out, char32_t cp);

// Offset of the first byte that starts no valid UTF-8 sequence (overlong forms, surrogates and
// values past U+10FFFF are invalid too), or npos when all of `s` is valid.
size_t find_invalid_utf8(std::string_view s);
// Each maximal invalid subsequence becomes U+FFFD, as Rust's from_utf8_lossy and Python's
// errors="replace" do.
std::string replace_invalid_utf8(std::string_view s);

enum class NormalForm { kNFC, kNFD, kNFKC, kNFKD };
std::string normalize(std::string_view s, NormalForm form);

bool is_whitespace(char32_t cp);         // Unicode White_Space (Rust char::is_whitespace)
bool is_control(char32_t cp);            // general category C* (Rust is_other)
bool is_punctuation(char32_t cp);        // general category P*
bool is_nonspacing_mark(char32_t cp);    // general category Mn
bool is_alphanumeric(char32_t cp);       // categories L* and N*
bool is_numeric(char32_t cp);            // categories N*
bool is_cjk_ideograph(char32_t cp);      // the blocks BERT puts spaces around
// Full lowercase mapping (U+0130 becomes two code points, as in Rust and Python).
void append_lowercase(std::string& out, char32_t cp);
std::string lowercase(std::string_view s);

}  // namespace mminfer::text
