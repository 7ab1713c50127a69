// Pre-tokenizers cut normalized text into pieces that the model encodes one by one (words,
// numbers, punctuation). Each mirrors the Hugging Face tokenizers pre-tokenizer of that name.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "modal/text/regex.h"

namespace mminfer::text {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their refinement; empty pieces never come out.
  virtual void pre_tokenize(std::vector<std::string>& pieces) const = 0;
};

// What happens to the delimiters a Split finds.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Splits on a literal string or a regex. `invert` swaps matches and the text between them,
// which is how CLIP keeps its regex matches and drops the whitespace between them.
class SplitPreTokenizer : public PreTokenizer {
 public:
  static std::unique_ptr<SplitPreTokenizer> literal(std::string pattern, SplitBehavior behavior, bool invert);
  static std::unique_ptr<SplitPreTokenizer> regex(const std::string& pattern, SplitBehavior behavior, bool invert);
  void pre_tokenize(std::vector<std::string>& pieces) const override;

 private:
  std::string literal_;
  std::unique_ptr<Regex> regex_;
  SplitBehavior behavior_ = SplitBehavior::kIsolated;
  bool invert_ = false;
};

// Maps bytes into GPT-2's byte-level alphabet; optionally adds a leading space and first splits
// with GPT-2's own regex (use_regex), as GPT-2 and Whisper tokenizer.json files ask.
class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex);
  void pre_tokenize(std::vector<std::string>& pieces) const override;

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;
};

// Splits on a per-code-point predicate (BertPreTokenizer, WhitespaceSplit, Punctuation, Digits).
class CharClassPreTokenizer : public PreTokenizer {
 public:
  struct Rule {
    std::function<bool(char32_t)> matches;
    SplitBehavior behavior;
  };
  explicit CharClassPreTokenizer(std::vector<Rule> rules) : rules_(std::move(rules)) {}
  static std::unique_ptr<PreTokenizer> bert();              // whitespace removed, punctuation isolated
  static std::unique_ptr<PreTokenizer> whitespace_split();  // whitespace removed
  static std::unique_ptr<PreTokenizer> punctuation(SplitBehavior behavior);
  static std::unique_ptr<PreTokenizer> digits(bool individual);
  void pre_tokenize(std::vector<std::string>& pieces) const override;

 private:
  std::vector<Rule> rules_;
};

// HF "Whitespace": runs of word characters and runs of other non-space characters.
std::unique_ptr<PreTokenizer> make_whitespace_pre_tokenizer();

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void pre_tokenize(std::vector<std::string>& pieces) const override;

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

}  // namespace mminfer::text
