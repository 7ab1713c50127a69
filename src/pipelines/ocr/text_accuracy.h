// How far a reading is from the text it should have been: character errors as OCR evaluations
// count them (NFKC, whitespace runs as one space, edit distance over code points).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace mminfer::ocr {

// NFKC (full-width ，：？ become , : ?), whitespace runs as one space, no space at either end.
std::string normalize_for_scoring(std::string_view text);

struct CharErrors {
  size_t errors = 0;  // insertions, deletions and substitutions that turn `got` into `want`
  size_t chars = 0;   // code points of `want`
};
// Both sides normalized first. CER over a set is the sum of errors over the sum of chars.
CharErrors char_errors(std::string_view got, std::string_view want);

}  // namespace mminfer::ocr
