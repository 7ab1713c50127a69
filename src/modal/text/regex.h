// A compiled PCRE2 pattern in UTF + UCP mode, so \p{L}, \p{N} and \s in tokenizer.json patterns
// mean what they mean in the Rust and Oniguruma engines the files were written for. (PCRE2's
// \s is Unicode White_Space plus U+180E; \w lacks marks, which only our own Whitespace
// pre-tokenizer pattern cares about and spells out.)
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace mminfer::text {

class Regex {
 public:
  explicit Regex(const std::string& pattern);  // throws Error naming the pattern and offset
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Calls on_match(begin, end) for each non-overlapping match, left to right, in valid UTF-8.
  // Empty matches are skipped. Throws Error when PCRE2 gives up (match or depth limit).
  void for_each_match(std::string_view text, const std::function<void(size_t, size_t)>& on_match) const;
  const std::string& pattern() const { return pattern_; }

 private:
  struct Impl;
  std::string pattern_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mminfer::text
