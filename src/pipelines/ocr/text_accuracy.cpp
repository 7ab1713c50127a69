#include "pipelines/ocr/text_accuracy.h"

#include <algorithm>
#include <vector>

#include "modal/text/unicode.h"

namespace mminfer::ocr {

namespace {

std::u32string code_points(std::string_view s) {
  std::u32string out;
  for (size_t pos = 0; pos < s.size();) out.push_back(text::next_code_point(s, pos));
  return out;
}

}  // namespace

std::string normalize_for_scoring(std::string_view raw) {
  const std::string nfkc = text::normalize(text::replace_invalid_utf8(raw), text::NormalForm::kNFKC);
  std::string out;
  bool space = false;
  for (size_t pos = 0; pos < nfkc.size();) {
    const char32_t cp = text::next_code_point(nfkc, pos);
    if (text::is_whitespace(cp)) {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' '), space = false;
    text::append_utf8(out, cp);
  }
  return out;
}

CharErrors char_errors(std::string_view got, std::string_view want) {
  const std::u32string a = code_points(normalize_for_scoring(got)), b = code_points(normalize_for_scoring(want));
  std::vector<size_t> row(b.size() + 1), next(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    next[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      next[j] = std::min({row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(row, next);
  }
  return {row[b.size()], b.size()};
}

}  // namespace mminfer::ocr
