// Turns a growing list of token ids into text pieces that are safe to print: a byte-level BPE
// token may end in the middle of a UTF-8 character, so text is held back until the character is
// complete. Decoding runs over a short window of recent tokens (the scheme of Hugging Face's
// text-generation-inference), so each step costs a few tokens, not the whole sequence, and
// decoders that change a token's text by its left neighbour (SentencePiece's leading space) stay
// right.
#pragma once
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "generate/token.h"

namespace mminfer::generate {

// Any detokenizer: token ids to text. It may return incomplete UTF-8 at the end, or U+FFFD there.
using DecodeFn = std::function<std::string(std::span<const TokenId>)>;

// True when `text` ends inside a UTF-8 character or on U+FFFD (what decoders print for one).
bool ends_with_incomplete_utf8(const std::string& text);

class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(DecodeFn decode) : decode_(std::move(decode)) {}

  // The text `token` completes; empty while a character is still open.
  std::string push(TokenId token);
  // Whatever is still held back (possibly an incomplete character): for the end of a stream.
  std::string flush();

 private:
  std::string decode(size_t begin, size_t end) const;

  DecodeFn decode_;
  std::vector<TokenId> tokens_;
  size_t prefix_offset_ = 0;  // start of the window decoded for context
  size_t read_offset_ = 0;    // tokens before this are printed
};

}  // namespace mminfer::generate
