// Added tokens ("<|endoftext|>", "[CLS]", "<|startoftext|>") are found in the text before it is
// normalized or split, so user text spelling a special token gets its id, as in Hugging Face
// tokenizers. Tokens marked `normalized` are matched in the normalized text instead.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "modal/text/model.h"

namespace mminfer::text {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool single_word = false;  // only where no letter, digit or '_' touches it
  bool lstrip = false;       // also swallows the whitespace before it
  bool rstrip = false;       // and after it
  bool normalized = false;   // matched after normalization
  bool special = false;      // skipped when decoding with skip_special_tokens
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  explicit AddedVocabulary(std::vector<AddedToken> tokens);

  struct Segment {
    std::string_view text;
    int32_t id = -1;  // >= 0: the text is this added token
  };
  // Cuts `text` at the leftmost-longest matches of the tokens whose `normalized` flag equals
  // `normalized`; the pieces between matches come out with id -1.
  void split(std::string_view text, bool normalized, std::vector<Segment>& out) const;

  bool is_special(int32_t id) const;
  std::optional<int32_t> find(std::string_view content) const { return vocab_.find(content); }
  const std::string* token(int32_t id) const { return vocab_.token(id); }
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  std::vector<AddedToken> tokens_;
  Vocab vocab_;
  std::vector<bool> special_;                             // by id
  std::array<std::vector<int>, 256> by_first_byte_[2];    // [normalized][byte] -> tokens, longest first
};

}  // namespace mminfer::text
