// Tokenizer: text -> model inputs (ids, attention mask, type ids) and ids -> text, as a Hugging
// Face tokenizer.json describes it. The pipeline per text:
//   added tokens found -> normalizer -> pre-tokenizer -> model (BPE / WordPiece)
//   -> truncation -> post-processor (special tokens) -> padding.
// Input must be valid UTF-8: invalid bytes are rejected with an Error naming the byte offset
// rather than guessed at (replace_invalid_utf8 in unicode.h is there for callers who prefer
// U+FFFD substitution). All methods are const and safe to call from several threads.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "modal/text/encoding.h"
#include "modal/text/tokenizer_json.h"

namespace mminfer::text {

class Tokenizer {
 public:
  explicit Tokenizer(TokenizerParts parts);
  // Throw Error with one line naming the file or JSON path at fault.
  static Tokenizer from_file(const std::string& path);
  static Tokenizer from_json(std::string_view json) { return Tokenizer(parse_tokenizer_json(json)); }

  Encoding encode(std::string_view text, bool add_special_tokens = true) const;
  Encoding encode_pair(std::string_view first, std::string_view second, bool add_special_tokens = true) const;
  // Padding to the longest (BatchLongest) applies across the batch.
  std::vector<Encoding> encode_batch(const std::vector<std::string>& texts, bool add_special_tokens = true) const;
  // Model ids alone: no special tokens, truncation or padding.
  std::vector<int32_t> tokenize(std::string_view text) const;

  // Bytes that do not form UTF-8 (a byte-level token split mid-character) come out as U+FFFD.
  // Throws Error on an id that is in neither the vocabulary nor the added tokens.
  std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens = true) const;

  // Defaults come from tokenizer.json; CLIP callers set {77} and a fixed padding of 77.
  void set_truncation(std::optional<Truncation> t) { truncation_ = t; }
  void set_padding(std::optional<Padding> p) { padding_ = std::move(p); }
  const std::optional<Truncation>& truncation() const { return truncation_; }
  const std::optional<Padding>& padding() const { return padding_; }

  std::optional<int64_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(int64_t id) const;
  // One past the largest id of the vocabulary and the added tokens.
  int64_t vocab_end() const;

 private:
  void append_ids(std::string_view segment, std::vector<int32_t>& ids) const;
  Encoding finish(std::vector<int32_t> first, std::vector<int32_t>* second, bool add_special_tokens) const;

  TokenizerParts parts_;
  std::optional<Truncation> truncation_;
  std::optional<Padding> padding_;
};

}  // namespace mminfer::text
