#include "modal/text/decoder.h"

#include <string_view>

#include "modal/text/byte_level.h"
#include "modal/text/unicode.h"

namespace mminfer::text {

namespace {

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}

std::string join(const std::vector<std::string>& tokens) {
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

// Parses "<0xNN>"; -1 when the token is not of that form.
int fallback_byte(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1; };
  int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

}  // namespace

void ByteLevelDecoder::decode(std::vector<std::string>& tokens) const {
  std::string bytes = from_byte_level(join(tokens));
  tokens.assign(1, std::move(bytes));
}

void WordPieceDecoder::decode(std::vector<std::string>& tokens) const {
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string& t = tokens[i];
    if (i > 0) {
      if (!prefix_.empty() && t.compare(0, prefix_.size(), prefix_) == 0) t.erase(0, prefix_.size());
      else t.insert(0, " ");
    }
    if (cleanup_) {
      static const std::pair<const char*, const char*> kRules[] = {
          {" .", "."},     {" ?", "?"},     {" !", "!"},     {" ,", ","},          {" ' ", "'"},   {" n't", "n't"},
          {" 'm", "'m"},   {" 's", "'s"},   {" 've", "'ve"}, {" 're", "'re"},      {" do not", " don't"}};
      for (const auto& [from, to] : kRules) replace_all(t, from, to);
    }
  }
}

void BpeSuffixDecoder::decode(std::vector<std::string>& tokens) const {
  for (size_t i = 0; i < tokens.size(); ++i) replace_all(tokens[i], suffix_, i + 1 == tokens.size() ? "" : " ");
}

void ReplaceDecoder::decode(std::vector<std::string>& tokens) const {
  for (auto& t : tokens) replace_all(t, pattern_, content_);
}

void StripDecoder::decode(std::vector<std::string>& tokens) const {
  if (content_.empty()) return;
  for (auto& t : tokens) {
    for (size_t n = 0; n < start_ && t.compare(0, content_.size(), content_) == 0; ++n) t.erase(0, content_.size());
    for (size_t n = 0; n < stop_ && t.size() >= content_.size() &&
                       t.compare(t.size() - content_.size(), content_.size(), content_) == 0;
         ++n)
      t.erase(t.size() - content_.size());
  }
}

void FuseDecoder::decode(std::vector<std::string>& tokens) const { tokens.assign(1, join(tokens)); }

void ByteFallbackDecoder::decode(std::vector<std::string>& tokens) const {
  std::vector<std::string> out;
  std::string pending;  // bytes of consecutive <0xNN> tokens
  size_t pending_tokens = 0;
  auto flush = [&] {
    if (!pending_tokens) return;
    // Bytes that do not form valid UTF-8 give one U+FFFD per token, as Hugging Face does.
    if (find_invalid_utf8(pending) == std::string_view::npos) out.push_back(pending);
    else
      for (size_t i = 0; i < pending_tokens; ++i) out.push_back("\xEF\xBF\xBD");
    pending.clear();
    pending_tokens = 0;
  };
  for (auto& t : tokens) {
    int b = fallback_byte(t);
    if (b >= 0) {
      pending += static_cast<char>(b);
      ++pending_tokens;
    } else {
      flush();
      out.push_back(std::move(t));
    }
  }
  flush();
  tokens = std::move(out);
}

}  // namespace mminfer::text
