// What the decoding loop asks of a model with a KV cache: a fresh cache for some sequences (rows),
// the prompt of one row, then one more token for a run of neighbouring rows. Decoder-only and
// encoder-decoder models differ only in how they do these.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "generate/token.h"
#include "mminfer/tensor.h"
#include "runtime/cached_decoder.h"

namespace mminfer::generate {

class StepModel {
 public:
  virtual ~StepModel() = default;
  // Drops every row and makes room for `rows` sequences of up to `capacity` positions.
  virtual void start(int64_t rows, int64_t capacity) = 0;
  virtual int64_t length(int64_t row) const = 0;  // positions held
  virtual int64_t capacity() const = 0;
  virtual size_t cache_bytes() const = 0;
  // The logits after the prompt, [1, vocab].
  virtual Tensor prefill(int64_t row, const std::vector<TokenId>& prompt) = 0;
  // ids [n, 1] for rows [row, row + n); logits [n, vocab].
  virtual Tensor step(int64_t row, const Tensor& ids) = 0;
  // Beam search: row r continues row sources[r] (only within one input's beams).
  virtual void reorder(std::span<const int64_t> sources) = 0;
  // Speculative decoding: `ids` as row `row`'s next positions, with the logits after each of
  // them, [ids, vocab]; and a row cut back to its first `length` positions (proposals the
  // target model did not take). Models that cannot throw std::invalid_argument.
  virtual Tensor extend(int64_t row, const std::vector<TokenId>& ids);
  virtual void truncate(int64_t row, int64_t length);
  // Draft heads (runtime::CachedDecoder::draft_heads): how many the model has, 0 for none; and
  // their guesses after the last prefill() (at 0: after its last position) or extend() (at i:
  // after its i-th id): each of the first `n` heads' most likely token. Models without throw
  // std::invalid_argument.
  virtual int64_t draft_heads() const { return 0; }
  virtual std::vector<TokenId> draft_guesses(int64_t at, size_t n) const;
  // Greedy loops: while set, prefill() and step() may return rows that serve only a greedy
  // choice after `process` (runtime::CachedDecoder::set_greedy_process); null unsets it. Models
  // without the runtime's output projection ignore it and return full logits.
  virtual void set_greedy_process(runtime::GreedyRowProcess process) {}
};

// A decoder-only model: the prompt runs through the same cached decoder as every later token.
class DecoderOnlyModel final : public StepModel {
 public:
  explicit DecoderOnlyModel(runtime::CachedDecoder& decoder, std::string tokens_input = "input_ids")
      : decoder_(decoder), tokens_input_(std::move(tokens_input)) {}
  void start(int64_t rows, int64_t capacity) override { cache_.emplace(decoder_.make_cache(rows, capacity)); }
  int64_t length(int64_t row) const override { return cache_->length(row); }
  int64_t capacity() const override { return cache_->capacity(); }
  size_t cache_bytes() const override { return cache_->bytes(); }
  Tensor prefill(int64_t row, const std::vector<TokenId>& prompt) override;
  Tensor step(int64_t row, const Tensor& ids) override { return decoder_.step(*cache_, row, tokens_input_, ids); }
  void reorder(std::span<const int64_t> sources) override { cache_->reorder(sources); }
  Tensor extend(int64_t row, const std::vector<TokenId>& ids) override;
  void truncate(int64_t row, int64_t length) override;
  void set_greedy_process(runtime::GreedyRowProcess process) override { decoder_.set_greedy_process(std::move(process)); }

 private:
  runtime::CachedDecoder& decoder_;
  std::string tokens_input_;
  std::optional<runtime::KvCache> cache_;
};

Tensor ids_tensor(const std::vector<TokenId>& ids);  // int64 [1, n]

}  // namespace mminfer::generate
