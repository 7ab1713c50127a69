// Normalizers rewrite text before it is split: Unicode forms, case, accents, the cleanup BERT
// and CLIP apply. Each mirrors the Hugging Face tokenizers normalizer of the same name.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "modal/text/regex.h"
#include "modal/text/unicode.h"

namespace mminfer::text {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string_view text) const = 0;
};

class UnicodeNormalizer : public Normalizer {  // NFC, NFD, NFKC, NFKD
 public:
  explicit UnicodeNormalizer(NormalForm form) : form_(form) {}
  std::string normalize(std::string_view text) const override { return text::normalize(text, form_); }

 private:
  NormalForm form_;
};

class LowercaseNormalizer : public Normalizer {
 public:
  std::string normalize(std::string_view text) const override { return lowercase(text); }
};

// Removes nonspacing marks; accents come off only after an NFD or NFKD step splits them out.
class StripAccentsNormalizer : public Normalizer {
 public:
  std::string normalize(std::string_view text) const override;
};

class StripNormalizer : public Normalizer {  // trims Unicode whitespace
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(std::string_view text) const override;

 private:
  bool left_, right_;
};

// Replaces every match of a literal string or a regex (CLIP uses \s+ -> " ").
class ReplaceNormalizer : public Normalizer {
 public:
  static std::unique_ptr<ReplaceNormalizer> literal(std::string pattern, std::string content);
  static std::unique_ptr<ReplaceNormalizer> regex(const std::string& pattern, std::string content);
  std::string normalize(std::string_view text) const override;

 private:
  std::string literal_;
  std::unique_ptr<Regex> regex_;
  std::string content_;
};

class PrependNormalizer : public Normalizer {  // prefix on non-empty text
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string normalize(std::string_view text) const override;

 private:
  std::string prefix_;
};

struct BertNormalizerOptions {
  bool clean_text = true;           // drop control characters, map whitespace to ' '
  bool handle_chinese_chars = true; // spaces around CJK ideographs, so each is its own word
  bool strip_accents = true;        // tokenizer.json's null means "same as lowercase"
  bool lowercase = true;
};

class BertNormalizer : public Normalizer {
 public:
  explicit BertNormalizer(BertNormalizerOptions options) : options_(options) {}
  std::string normalize(std::string_view text) const override;

 private:
  BertNormalizerOptions options_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  std::string normalize(std::string_view text) const override;

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace mminfer::text
