// The model inputs one text becomes, and the truncation and padding that fit it to a length.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mminfer::text {

// int64 throughout, the type ONNX text models take for all three inputs.
struct Encoding {
  std::vector<int64_t> ids;
  std::vector<int64_t> type_ids;             // 0 for the first sequence, 1 for a pair's second
  std::vector<int64_t> attention_mask;       // 1 for tokens, 0 for padding
  std::vector<int64_t> special_tokens_mask;  // 1 where the post-processor added a token
};

enum class Side { kRight, kLeft };

// Which sequence of a pair gives up tokens when the pair is too long.
enum class TruncationStrategy { kLongestFirst, kOnlyFirst, kOnlySecond };

struct Truncation {
  size_t max_length = 0;  // including the special tokens the post-processor adds
  TruncationStrategy strategy = TruncationStrategy::kLongestFirst;
  Side direction = Side::kRight;  // the side tokens are dropped from
};

struct Padding {
  bool to_fixed_length = false;  // else to the longest encoding of the batch
  size_t length = 0;             // with to_fixed_length
  size_t multiple_of = 0;        // 0: none
  Side direction = Side::kRight;
  int64_t pad_id = 0;
  int64_t pad_type_id = 0;
  std::string pad_token = "[PAD]";
};

// Shortens the model ids of one or two sequences so that, with `specials` post-processor
// tokens, they fit `t.max_length`. Throws Error when the strategy cannot make them fit.
void truncate(std::vector<int32_t>& first, std::vector<int32_t>* second, size_t specials, const Truncation& t);
// Pads `e` to `length` tokens (no-op when it is already that long or longer).
void pad(Encoding& e, size_t length, const Padding& p);

}  // namespace mminfer::text
