#include "modal/text/wordpiece_model.h"

#include <algorithm>
#include <optional>

#include "core/one_line.h"
#include "mminfer/status.h"

namespace mminfer::text {

WordPieceModel::WordPieceModel(Vocab vocab, WordPieceOptions options)
    : vocab_(std::move(vocab)), options_(std::move(options)) {
  auto unk = vocab_.find(options_.unk_token);
  if (!unk) throw Error("WordPiece unk_token '" + one_line(options_.unk_token) + "' is not in the vocabulary");
  unk_id_ = *unk;
  longest_token_bytes_ = vocab_.longest_token_bytes();
}

void WordPieceModel::tokenize(std::string_view piece, std::vector<int32_t>& ids) const {
  size_t chars = 0;
  for (unsigned char c : piece) chars += (c & 0xC0) != 0x80;
  if (chars > options_.max_input_chars_per_word) {
    ids.push_back(unk_id_);
    return;
  }
  auto on_boundary = [&](size_t i) { return i == piece.size() || (static_cast<unsigned char>(piece[i]) & 0xC0) != 0x80; };
  const size_t first = ids.size();
  std::string candidate;
  for (size_t start = 0; start < piece.size();) {
    const std::string_view prefix = start > 0 ? std::string_view(options_.continuing_subword_prefix) : std::string_view();
    size_t end = std::min(piece.size(), start + longest_token_bytes_);
    std::optional<int32_t> found;
    for (; end > start; --end) {
      if (!on_boundary(end)) continue;
      candidate.assign(prefix);
      candidate.append(piece.substr(start, end - start));
      if ((found = vocab_.find(candidate))) break;
    }
    if (!found) {  // some part of the word is not in the vocabulary: the whole word is unknown
      ids.resize(first);
      ids.push_back(unk_id_);
      return;
    }
    ids.push_back(*found);
    start = end;
  }
}

}  // namespace mminfer::text
