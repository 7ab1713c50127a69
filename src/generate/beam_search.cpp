#include "generate/beam_search.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "generate/softmax.h"

namespace mminfer::generate {
namespace {

// The `keep` best of an item's rows x vocab candidate scores, as indices into them (row * vocab +
// token), best first, ties to the lower index: each row's best go through a short sorted list
// (one comparison per candidate once it is full), then the rows' lists are merged. A full sort
// of every candidate cost more than the decoder step at Whisper's 51,865 tokens x 5 beams.
std::vector<size_t> best_candidates(const float* item, size_t rows, size_t vocab, size_t keep) {
  const auto before = [&](size_t x, size_t y) { return item[x] > item[y] || (item[x] == item[y] && x < y); };
  std::vector<size_t> all, row_best;
  for (size_t r = 0; r < rows; ++r) {
    row_best.clear();
    for (size_t i = r * vocab, end = i + vocab; i < end; ++i) {
      // Indices rise along the scan, so a later equal score never goes before a kept one.
      if (row_best.size() == keep && !(item[i] > item[row_best.back()])) continue;
      if (row_best.size() == keep) row_best.pop_back();
      row_best.insert(std::upper_bound(row_best.begin(), row_best.end(), i, before), i);
    }
    all.insert(all.end(), row_best.begin(), row_best.end());
  }
  std::sort(all.begin(), all.end(), before);
  all.resize(std::min(all.size(), keep));
  return all;
}

}  // namespace

BeamSearch::BeamSearch(BeamSearchOptions options, const std::vector<std::vector<TokenId>>& prompts)
    : options_(std::move(options)), batch_(prompts.size()) {
  if (options_.num_beams < 1) throw std::invalid_argument("beam search: num_beams must be at least 1");
  if (options_.num_return_sequences < 1 || options_.num_return_sequences > options_.num_beams) {
    throw std::invalid_argument("beam search: num_return_sequences must be between 1 and num_beams (" +
                                std::to_string(options_.num_beams) + ")");
  }
  if (prompts.empty()) throw std::invalid_argument("beam search: no prompts");
  prompt_length_ = prompts[0].size();
  for (const auto& p : prompts) {
    if (p.size() != prompt_length_) throw std::invalid_argument("beam search: prompts must have the same length (pad them)");
  }
  if (prompt_length_ == 0) throw std::invalid_argument("beam search: empty prompt (give at least the start token)");
  if (options_.max_length <= prompt_length_) {
    throw std::invalid_argument("beam search: max_length " + std::to_string(options_.max_length) +
                                " leaves no room after a prompt of " + std::to_string(prompt_length_) + " tokens");
  }
  length_ = prompt_length_;
  for (const auto& p : prompts) {
    for (size_t k = 0; k < options_.num_beams; ++k) {
      sequences_.push_back(p);
      // Only the first beam is live at the start, so the first step does not pick one token k times.
      scores_.push_back(k == 0 ? 0.0f : -1e9f);
    }
  }
  finished_.resize(batch_);
}

void BeamSearch::add(Hypotheses& hyps, std::vector<TokenId> tokens, float sum_logprobs, size_t generated_length) const {
  const float score = sum_logprobs / std::pow(static_cast<float>(generated_length), options_.length_penalty);
  const size_t beams = options_.num_beams;
  if (hyps.kept.size() < beams || score > hyps.worst) {
    hyps.kept.push_back({std::move(tokens), score});
    if (hyps.kept.size() > beams) {
      // Drop the worst (the earliest added among equals, as a stable sort would).
      size_t worst = 0;
      for (size_t i = 1; i < hyps.kept.size(); ++i) {
        if (hyps.kept[i].score < hyps.kept[worst].score) worst = i;
      }
      hyps.kept.erase(hyps.kept.begin() + static_cast<ptrdiff_t>(worst));
      hyps.worst = std::min_element(hyps.kept.begin(), hyps.kept.end(), [](const Hypothesis& a, const Hypothesis& b) {
                     return a.score < b.score;
                   })->score;
    } else {
      hyps.worst = std::min(score, hyps.worst);
    }
  }
}

bool BeamSearch::is_done(const Hypotheses& hyps, float best_sum_logprobs, size_t length) const {
  if (hyps.kept.size() < options_.num_beams) return false;
  if (options_.early_stopping == EarlyStopping::kTrue) return true;
  // The best score a running beam could still reach: now (heuristic), or at max_length when a
  // positive length penalty favours longer hypotheses ("never").
  size_t generated = length - prompt_length_;
  if (options_.early_stopping == EarlyStopping::kNever && options_.length_penalty > 0.0f) {
    generated = options_.max_length - prompt_length_;
  }
  const float best_reachable = best_sum_logprobs / std::pow(static_cast<float>(generated), options_.length_penalty);
  return hyps.worst >= best_reachable;
}

void BeamSearch::step(std::span<const float> logits, size_t vocab, const LogitsPipeline* pipeline) {
  const size_t beams = options_.num_beams;
  if (vocab == 0 || logits.size() != rows() * vocab) {
    throw std::invalid_argument("beam search: expected logits of " + std::to_string(rows()) + " rows x " +
                                std::to_string(vocab) + ", got " + std::to_string(logits.size()) + " values");
  }
  if (done()) throw std::logic_error("beam search: step() after the search is done");
  // Candidate scores: the beam's sum plus the processed log-probability of each token.
  std::vector<float> candidates(logits.size());
  for (size_t row = 0; row < rows(); ++row) {
    if (finished_[row / beams].done) continue;  // its rows idle on padding: their logits mean nothing
    std::span<float> out(candidates.data() + row * vocab, vocab);
    log_softmax(logits.subspan(row * vocab, vocab), out);
    if (pipeline) pipeline->process(out, sequences_[row], prompt_length_);
    for (float& x : out) x += scores_[row];
  }
  const size_t keep = std::min(std::max<size_t>(2, 1 + options_.eos_token_ids.size()) * beams, beams * vocab);
  const size_t next_length = length_ + 1;  // the length the candidates' scores are for
  std::vector<std::vector<TokenId>> next_sequences(rows());
  std::vector<float> next_scores(rows(), 0.0f);
  beam_indices_.assign(rows(), 0);
  next_tokens_.assign(rows(), options_.pad_token_id);
  for (size_t b = 0; b < batch_; ++b) {
    Hypotheses& hyps = finished_[b];
    const size_t first_row = b * beams;
    if (hyps.done) {
      // A finished item's rows idle on padding, each continuing itself (no cache movement).
      for (size_t k = 0; k < beams; ++k) {
        beam_indices_[first_row + k] = first_row + k;
        next_sequences[first_row + k] = std::move(sequences_[first_row + k]);
        next_sequences[first_row + k].push_back(options_.pad_token_id);
      }
      continue;
    }
    const float* item = candidates.data() + first_row * vocab;
    const std::vector<size_t> order = best_candidates(item, beams, vocab, keep);
    size_t filled = 0;
    for (size_t rank = 0; rank < keep && filled < beams; ++rank) {
      const size_t parent = first_row + order[rank] / vocab;
      const TokenId token = static_cast<TokenId>(order[rank] % vocab);
      const float score = item[order[rank]];
      const bool is_eos = std::find(options_.eos_token_ids.begin(), options_.eos_token_ids.end(), token) !=
                          options_.eos_token_ids.end();
      if (is_eos) {
        // An EOS outside the top num_beams candidates does not end a hypothesis.
        if (rank >= beams) continue;
        std::vector<TokenId> tokens = sequences_[parent];
        tokens.push_back(token);
        add(hyps, std::move(tokens), score, next_length - prompt_length_);
        continue;
      }
      const size_t row = first_row + filled++;
      beam_indices_[row] = parent;
      next_tokens_[row] = token;
      next_scores[row] = score;
      next_sequences[row] = sequences_[parent];
      next_sequences[row].push_back(token);
    }
    if (filled < beams) {
      throw std::invalid_argument("beam search: fewer than " + std::to_string(beams) +
                                  " candidates that are not EOS (vocabulary too small or too many tokens masked)");
    }
    hyps.done = is_done(hyps, item[order[0]], next_length);
  }
  sequences_ = std::move(next_sequences);
  scores_ = std::move(next_scores);
  length_ = next_length;
}

bool BeamSearch::done() const {
  if (length_ >= options_.max_length) return true;
  return std::all_of(finished_.begin(), finished_.end(), [](const Hypotheses& h) { return h.done; });
}

std::vector<std::vector<Hypothesis>> BeamSearch::finalize() {
  std::vector<std::vector<Hypothesis>> best(batch_);
  for (size_t b = 0; b < batch_; ++b) {
    Hypotheses& hyps = finished_[b];
    if (!hyps.done) {
      for (size_t k = 0; k < options_.num_beams; ++k) {
        const size_t row = b * options_.num_beams + k;
        add(hyps, sequences_[row], scores_[row], sequences_[row].size() - prompt_length_);
      }
      hyps.done = true;
    }
    std::vector<Hypothesis> sorted = hyps.kept;
    std::stable_sort(sorted.begin(), sorted.end(), [](const Hypothesis& x, const Hypothesis& y) { return x.score > y.score; });
    sorted.resize(std::min(sorted.size(), options_.num_return_sequences));
    best[b] = std::move(sorted);
  }
  return best;
}

}  // namespace mminfer::generate
