// WordPiece (BERT): each word becomes the longest vocabulary prefix, then the longest "##"
// continuation, and so on; a word with any part missing, or too long, becomes one unk token.
#pragma once
#include <string>

#include "modal/text/model.h"

namespace mminfer::text {

struct WordPieceOptions {
  std::string unk_token = "[UNK]";
  std::string continuing_subword_prefix = "##";
  size_t max_input_chars_per_word = 100;  // counted in code points, as BERT does
};

class WordPieceModel : public Model {
 public:
  // Throws Error when the unk token is not in the vocabulary.
  WordPieceModel(Vocab vocab, WordPieceOptions options);
  void tokenize(std::string_view piece, std::vector<int32_t>& ids) const override;
  const Vocab& vocab() const override { return vocab_; }

 private:
  Vocab vocab_;
  WordPieceOptions options_;
  int32_t unk_id_;
  size_t longest_token_bytes_ = 0;  // bounds the longest-match search
};

}  // namespace mminfer::text
