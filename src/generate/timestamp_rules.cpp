#include "generate/timestamp_rules.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace mminfer::generate {
namespace {

constexpr float kRemoved = -std::numeric_limits<float>::infinity();

void remove_range(std::span<float> logits, size_t first, size_t end) {
  end = std::min(end, logits.size());
  if (first < end) std::fill(logits.begin() + static_cast<ptrdiff_t>(first), logits.begin() + static_cast<ptrdiff_t>(end), kRemoved);
}

// log(sum(exp(x))) over a range, in double (the comparison below is between log-probabilities,
// so the row's normaliser cancels and need not be computed).
double log_sum_exp(std::span<const float> x) {
  const float top = x.empty() ? kRemoved : *std::max_element(x.begin(), x.end());
  if (top == kRemoved) return -std::numeric_limits<double>::infinity();
  double sum = 0.0;
  for (float v : x) sum += std::exp(static_cast<double>(v) - top);
  return top + std::log(sum);
}

}  // namespace

void apply_timestamp_rules(std::span<float> logits, std::span<const TokenId> sequence, size_t prompt_length,
                           const TimestampRules& r) {
  const size_t vocab = logits.size();
  if (r.eot < 0 || r.no_timestamps < 0 || r.timestamp_begin <= r.eot || r.timestamp_begin <= r.no_timestamps ||
      static_cast<size_t>(r.timestamp_begin) >= vocab)
    throw std::invalid_argument("timestamp rules: timestamp tokens from " + std::to_string(r.timestamp_begin) +
                                " do not fit a vocabulary of " + std::to_string(vocab) + " after the end token " +
                                std::to_string(r.eot) + " and <|notimestamps|> " + std::to_string(r.no_timestamps));
  if (prompt_length > sequence.size()) throw std::invalid_argument("timestamp rules: the prompt is longer than the sequence");
  const auto generated = sequence.subspan(prompt_length);
  const size_t begin = static_cast<size_t>(r.timestamp_begin);
  auto is_timestamp = [&](TokenId t) { return t >= r.timestamp_begin; };

  logits[static_cast<size_t>(r.no_timestamps)] = kRemoved;

  const size_t n = generated.size();
  const bool last_was_timestamp = n >= 1 && is_timestamp(generated[n - 1]);
  const bool penultimate_was_timestamp = n < 2 || is_timestamp(generated[n - 2]);
  if (last_was_timestamp) {
    if (penultimate_was_timestamp) remove_range(logits, begin, vocab);  // a pair is complete: text next
    else remove_range(logits, 0, static_cast<size_t>(r.eot));           // a segment is open: no text
  }

  const auto last_stamp = std::find_if(generated.rbegin(), generated.rend(), is_timestamp);
  if (last_stamp != generated.rend()) {
    // The segment that a closing timestamp ended may start at the same time; otherwise move on.
    const bool just_closed = last_was_timestamp && !penultimate_was_timestamp;
    remove_range(logits, begin, static_cast<size_t>(*last_stamp) + (just_closed ? 0 : 1));
  }

  if (n == 0) {
    remove_range(logits, 0, begin);
    if (r.max_initial_index) remove_range(logits, begin + *r.max_initial_index + 1, vocab);
  }

  const std::span<const float> text(logits.data(), begin), stamps(logits.data() + begin, vocab - begin);
  const float best_text = *std::max_element(text.begin(), text.end());
  if (log_sum_exp(stamps) > static_cast<double>(best_text)) remove_range(logits, 0, begin);
}

}  // namespace mminfer::generate
