#include "modal/text/encoding.h"

#include <algorithm>

#include "mminfer/status.h"

namespace mminfer::text {

namespace {

void cut(std::vector<int32_t>& ids, size_t keep, Side side) {
  if (ids.size() <= keep) return;
  if (side == Side::kRight) ids.resize(keep);
  else ids.erase(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(keep));
}

}  // namespace

void truncate(std::vector<int32_t>& first, std::vector<int32_t>* second, size_t specials, const Truncation& t) {
  if (t.max_length == 0) return;
  if (specials > t.max_length)
    throw Error("truncation max_length " + std::to_string(t.max_length) + " leaves no room for the " +
                std::to_string(specials) + " special tokens");
  const size_t budget = t.max_length - specials;
  const size_t total = first.size() + (second ? second->size() : 0);
  if (total <= budget) return;
  if (!second) {
    if (t.strategy == TruncationStrategy::kOnlySecond)
      throw Error("truncation strategy only_second needs a pair of sequences");
    cut(first, budget, t.direction);
    return;
  }
  const size_t excess = total - budget;
  switch (t.strategy) {
    case TruncationStrategy::kLongestFirst: {
      // The shorter sequence (the first on a tie) keeps up to half the budget, the other the
      // rest, as Hugging Face tokenizers split it.
      const bool first_is_shorter = first.size() <= second->size();
      const size_t shorter = std::min(first_is_shorter ? first.size() : second->size(), budget / 2);
      const size_t target_a = first_is_shorter ? shorter : budget - shorter;
      const size_t target_b = first_is_shorter ? budget - shorter : shorter;
      cut(first, target_a, t.direction);
      cut(*second, target_b, t.direction);
      return;
    }
    case TruncationStrategy::kOnlyFirst:
      if (excess > first.size()) throw Error("truncation only_first cannot fit the pair: the second sequence alone is too long");
      cut(first, first.size() - excess, t.direction);
      return;
    case TruncationStrategy::kOnlySecond:
      if (excess > second->size()) throw Error("truncation only_second cannot fit the pair: the first sequence alone is too long");
      cut(*second, second->size() - excess, t.direction);
      return;
  }
}

void pad(Encoding& e, size_t length, const Padding& p) {
  if (p.multiple_of > 0 && length % p.multiple_of) length += p.multiple_of - length % p.multiple_of;
  if (e.ids.size() >= length) return;
  const size_t n = length - e.ids.size();
  auto extend = [&](std::vector<int64_t>& v, int64_t value) {
    if (p.direction == Side::kRight) v.insert(v.end(), n, value);
    else v.insert(v.begin(), n, value);
  };
  extend(e.ids, p.pad_id);
  extend(e.type_ids, p.pad_type_id);
  extend(e.attention_mask, 0);
  extend(e.special_tokens_mask, 1);
}

}  // namespace mminfer::text
