#include "generate/logits_processors.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "generate/softmax.h"

namespace mminfer::generate {
namespace {

constexpr float kRemoved = -std::numeric_limits<float>::infinity();

// Token ids ordered by logit, largest first, lower id first on ties: the one order every
// processor that ranks tokens uses, so that ties resolve the same way everywhere.
std::vector<size_t> ranked_ids(std::span<const float> logits) {
  std::vector<size_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), size_t{0});
  std::stable_sort(ids.begin(), ids.end(), [&](size_t a, size_t b) { return logits[a] > logits[b]; });
  return ids;
}

}  // namespace

void check_token_in_vocab(TokenId token, size_t vocab, const char* what) {
  if (token < 0 || static_cast<uint64_t>(token) >= vocab) {
    throw std::invalid_argument(std::string(what) + ": token id " + std::to_string(token) +
                                " is outside the vocabulary (size " + std::to_string(vocab) + ")");
  }
}

void apply_temperature(std::span<float> logits, float temperature) {
  if (!(temperature > 0.0f) || !std::isfinite(temperature)) {
    throw std::invalid_argument("temperature must be a positive number, got " + std::to_string(temperature));
  }
  if (temperature == 1.0f) return;
  for (float& x : logits) x /= temperature;
}

void apply_top_k(std::span<float> logits, size_t top_k, size_t min_keep) {
  if (top_k == 0) return;
  for (float x : logits) {
    if (std::isnan(x)) throw std::invalid_argument("logits contain NaN");
  }
  const size_t k = std::min(std::max(top_k, min_keep), logits.size());
  if (k == logits.size()) return;
  std::vector<float> sorted(logits.begin(), logits.end());
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<ptrdiff_t>(k - 1), sorted.end(), std::greater<float>());
  const float kth = sorted[k - 1];
  for (float& x : logits) {
    if (x < kth) x = kRemoved;
  }
}

void apply_top_p(std::span<float> logits, float top_p, size_t min_keep) {
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    throw std::invalid_argument("top_p must be in (0, 1], got " + std::to_string(top_p));
  }
  if (top_p == 1.0f || logits.empty()) return;
  const std::vector<double> probs = softmax(logits);
  const std::vector<size_t> order = ranked_ids(logits);
  double before = 0.0;  // probability of the tokens ranked above the current one
  size_t kept = 0;
  for (size_t id : order) {
    if (kept >= min_keep && before >= top_p) {
      logits[id] = kRemoved;
      continue;
    }
    before += probs[id];
    ++kept;
  }
}

void apply_min_p(std::span<float> logits, float min_p, size_t min_keep) {
  if (!(min_p >= 0.0f && min_p <= 1.0f)) {
    throw std::invalid_argument("min_p must be in [0, 1], got " + std::to_string(min_p));
  }
  if (min_p == 0.0f || logits.empty()) return;
  const std::vector<double> probs = softmax(logits);
  const double threshold = static_cast<double>(min_p) * *std::max_element(probs.begin(), probs.end());
  const std::vector<size_t> order = ranked_ids(logits);
  for (size_t rank = min_keep; rank < order.size(); ++rank) {
    if (probs[order[rank]] < threshold) logits[order[rank]] = kRemoved;
  }
}

void apply_repetition_penalty(std::span<float> logits, std::span<const TokenId> sequence, float penalty) {
  if (!(penalty > 0.0f) || !std::isfinite(penalty)) {
    throw std::invalid_argument("repetition_penalty must be a positive number, got " + std::to_string(penalty));
  }
  if (penalty == 1.0f) return;
  std::unordered_set<TokenId> seen;
  for (TokenId token : sequence) {
    check_token_in_vocab(token, logits.size(), "repetition_penalty sequence");
    if (!seen.insert(token).second) continue;
    float& x = logits[static_cast<size_t>(token)];
    x = x < 0.0f ? x * penalty : x / penalty;
  }
}

void apply_no_repeat_ngram(std::span<float> logits, std::span<const TokenId> sequence, size_t n) {
  if (n == 0) throw std::invalid_argument("no_repeat_ngram_size must be at least 1");
  if (sequence.size() + 1 < n) return;
  // The last n-1 tokens; every earlier place they occur bans the token that followed there.
  const size_t prefix = n - 1;
  const auto tail = sequence.subspan(sequence.size() - prefix);
  for (size_t start = 0; start + n <= sequence.size(); ++start) {
    if (std::equal(tail.begin(), tail.end(), sequence.begin() + static_cast<ptrdiff_t>(start))) {
      const TokenId banned = sequence[start + prefix];
      check_token_in_vocab(banned, logits.size(), "no_repeat_ngram sequence");
      logits[static_cast<size_t>(banned)] = kRemoved;
    }
  }
}

void suppress_tokens(std::span<float> logits, std::span<const TokenId> tokens) {
  for (TokenId token : tokens) {
    check_token_in_vocab(token, logits.size(), "suppress_tokens");
    logits[static_cast<size_t>(token)] = kRemoved;
  }
}

void force_token(std::span<float> logits, TokenId token) {
  check_token_in_vocab(token, logits.size(), "forced token");
  std::fill(logits.begin(), logits.end(), kRemoved);
  logits[static_cast<size_t>(token)] = 0.0f;
}

}  // namespace mminfer::generate
