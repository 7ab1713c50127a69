#include "generate/incremental_decoder.h"

namespace mminfer::generate {

bool ends_with_incomplete_utf8(const std::string& text) {
  if (text.size() >= 3 && text.compare(text.size() - 3, 3, "\xEF\xBF\xBD") == 0) return true;
  // Walk back over continuation bytes (at most 3) to the lead byte and compare lengths.
  size_t continuation = 0;
  size_t i = text.size();
  while (i > 0 && continuation < 4) {
    const auto byte = static_cast<unsigned char>(text[i - 1]);
    if ((byte & 0xC0) != 0x80) {
      size_t needed = 1;
      if ((byte & 0xE0) == 0xC0) needed = 2;
      else if ((byte & 0xF0) == 0xE0) needed = 3;
      else if ((byte & 0xF8) == 0xF0) needed = 4;
      return continuation + 1 < needed;
    }
    ++continuation;
    --i;
  }
  return false;  // stray continuation bytes: nothing more will complete them
}

std::string IncrementalDecoder::decode(size_t begin, size_t end) const {
  if (begin >= end) return {};
  return decode_(std::span<const TokenId>(tokens_.data() + begin, end - begin));
}

std::string IncrementalDecoder::push(TokenId token) {
  tokens_.push_back(token);
  const std::string before = decode(prefix_offset_, read_offset_);
  const std::string now = decode(prefix_offset_, tokens_.size());
  if (now.size() <= before.size() || ends_with_incomplete_utf8(now)) return {};
  prefix_offset_ = read_offset_;
  read_offset_ = tokens_.size();
  return now.substr(before.size());
}

std::string IncrementalDecoder::flush() {
  const std::string before = decode(prefix_offset_, read_offset_);
  const std::string now = decode(prefix_offset_, tokens_.size());
  prefix_offset_ = read_offset_ = tokens_.size();
  return now.size() > before.size() ? now.substr(before.size()) : std::string();
}

}  // namespace mminfer::generate
