#include "modal/text/added_tokens.h"

#include <algorithm>

#include "modal/text/unicode.h"

namespace mminfer::text {

namespace {

bool is_word_char(char32_t cp) { return cp == '_' || is_alphanumeric(cp); }

// Code point that ends just before byte `end` (valid UTF-8, end > 0).
char32_t code_point_before(std::string_view s, size_t end, size_t* start_out = nullptr) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  if (start_out) *start_out = start;
  size_t pos = start;
  return next_code_point(s, pos);
}

}  // namespace

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (int i = 0; i < static_cast<int>(tokens_.size()); ++i) {
    const AddedToken& t = tokens_[i];
    vocab_.add(t.content, t.id);
    if (static_cast<size_t>(t.id) >= special_.size()) special_.resize(t.id + 1, false);
    if (t.special) special_[t.id] = true;
    if (!t.content.empty()) by_first_byte_[t.normalized][static_cast<unsigned char>(t.content[0])].push_back(i);
  }
  for (auto& table : by_first_byte_)
    for (auto& list : table)
      std::stable_sort(list.begin(), list.end(),
                       [&](int a, int b) { return tokens_[a].content.size() > tokens_[b].content.size(); });
}

bool AddedVocabulary::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < special_.size() && special_[id];
}

void AddedVocabulary::split(std::string_view text, bool normalized, std::vector<Segment>& out) const {
  const auto& table = by_first_byte_[normalized];
  size_t done = 0;  // text before this is already emitted
  for (size_t pos = 0; pos < text.size(); ++pos) {
    const auto& candidates = table[static_cast<unsigned char>(text[pos])];
    for (int index : candidates) {
      const AddedToken& t = tokens_[index];
      if (text.compare(pos, t.content.size(), t.content) != 0) continue;
      size_t begin = pos, end = pos + t.content.size();
      if (t.single_word) {
        size_t after = end;
        bool free_before = begin == 0 || !is_word_char(code_point_before(text, begin));
        bool free_after = end == text.size() || !is_word_char(next_code_point(text, after));
        if (!free_before || !free_after) continue;
      }
      if (t.lstrip) {
        size_t start;
        while (begin > done && is_whitespace(code_point_before(text, begin, &start))) begin = start;
      }
      if (t.rstrip) {
        for (size_t next = end; next < text.size() && is_whitespace(next_code_point(text, next));) end = next;
      }
      if (begin > done) out.push_back({text.substr(done, begin - done), -1});
      out.push_back({text.substr(begin, end - begin), t.id});
      done = end;
      pos = end - 1;
      break;
    }
  }
  if (done < text.size()) out.push_back({text.substr(done), -1});
}

}  // namespace mminfer::text
