#include "modal/text/normalizer.h"

namespace mminfer::text {

namespace {

std::string remove_nonspacing_marks(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    size_t start = pos;
    char32_t cp = next_code_point(text, pos);
    if (!is_nonspacing_mark(cp)) out.append(text.substr(start, pos - start));
  }
  return out;
}

}  // namespace

std::string StripAccentsNormalizer::normalize(std::string_view text) const { return remove_nonspacing_marks(text); }

std::string StripNormalizer::normalize(std::string_view text) const {
  size_t begin = 0, end = text.size();
  if (left_) {
    while (begin < end) {
      size_t pos = begin;
      if (!is_whitespace(next_code_point(text, pos))) break;
      begin = pos;
    }
  }
  if (right_) {
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
      size_t pos = start;
      if (!is_whitespace(next_code_point(text, pos))) break;
      end = start;
    }
  }
  return std::string(text.substr(begin, end - begin));
}

std::unique_ptr<ReplaceNormalizer> ReplaceNormalizer::literal(std::string pattern, std::string content) {
  auto r = std::unique_ptr<ReplaceNormalizer>(new ReplaceNormalizer());
  r->literal_ = std::move(pattern);
  r->content_ = std::move(content);
  return r;
}

std::unique_ptr<ReplaceNormalizer> ReplaceNormalizer::regex(const std::string& pattern, std::string content) {
  auto r = std::unique_ptr<ReplaceNormalizer>(new ReplaceNormalizer());
  r->regex_ = std::make_unique<Regex>(pattern);
  r->content_ = std::move(content);
  return r;
}

std::string ReplaceNormalizer::normalize(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  size_t done = 0;
  auto replace = [&](size_t begin, size_t end) {
    out.append(text.substr(done, begin - done));
    out += content_;
    done = end;
  };
  if (regex_) {
    regex_->for_each_match(text, replace);
  } else if (!literal_.empty()) {
    for (size_t at = text.find(literal_); at != std::string_view::npos; at = text.find(literal_, done))
      replace(at, at + literal_.size());
  }
  out.append(text.substr(done));
  return out;
}

std::string PrependNormalizer::normalize(std::string_view text) const {
  return text.empty() ? std::string() : prefix_ + std::string(text);
}

std::string BertNormalizer::normalize(std::string_view text) const {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  for (size_t pos = 0; pos < text.size();) {
    size_t start = pos;
    char32_t cp = next_code_point(text, pos);
    if (options_.clean_text) {
      bool tab_or_newline = cp == '\t' || cp == '\n' || cp == '\r';
      if (cp == 0 || cp == 0xFFFD || (!tab_or_newline && is_control(cp))) continue;
      if (tab_or_newline || is_whitespace(cp)) {
        out += ' ';
        continue;
      }
    }
    if (options_.handle_chinese_chars && is_cjk_ideograph(cp)) {
      out += ' ';
      out.append(text.substr(start, pos - start));
      out += ' ';
      continue;
    }
    out.append(text.substr(start, pos - start));
  }
  if (options_.strip_accents) out = remove_nonspacing_marks(text::normalize(out, NormalForm::kNFD));
  if (options_.lowercase) out = lowercase(out);
  return out;
}

std::string SequenceNormalizer::normalize(std::string_view text) const {
  std::string current(text);
  for (const auto& step : steps_) current = step->normalize(current);
  return current;
}

}  // namespace mminfer::text
