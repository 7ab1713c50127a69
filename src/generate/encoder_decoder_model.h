// The decoder of an encoder-decoder model (Whisper, vision-encoder-decoder) as Optimum splits it
// (or merges it: decoder_model_merged.onnx may be given as both, its If on use_cache_branch fixed):
// `decoder_model.onnx` runs a row's prompt against its encoder states and returns the
// self-attention presents, copied once into the runtime's cache, and the cross-attention keys and
// values, kept per row for the rest of the sequence; `decoder_with_past_model.onnx` then runs each
// later token with the cache bound in place.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "generate/step_model.h"
#include "mminfer/session.h"

namespace mminfer::generate {

class EncoderDecoderModel final : public StepModel {
 public:
  // Throws Error naming the file and the reason. `draft_heads`: keep the decoders' draft heads
  // (their output draft_logits, which both must have) for draft_guesses(); else they are left
  // out, with their work, where the files have them.
  EncoderDecoderModel(const std::string& first_decoder, const std::string& with_past_decoder, const SessionOptions& options,
                      DType cache_dtype = DType::kFloat32, bool draft_heads = false);

  // The encoder's output, [inputs, frames, d]: the next start() makes `rows_per_input` rows for
  // each input (its beams), input i's rows coming first after input i - 1's.
  void set_encoder_states(Tensor states, int64_t rows_per_input = 1) {
    states_ = std::move(states);
    rows_per_input_ = rows_per_input;
  }

  void start(int64_t rows, int64_t capacity) override;
  int64_t length(int64_t row) const override { return cache_->length(row); }
  int64_t capacity() const override { return cache_->capacity(); }
  size_t cache_bytes() const override;
  Tensor prefill(int64_t row, const std::vector<TokenId>& prompt) override;
  Tensor step(int64_t row, const Tensor& ids) override;
  void reorder(std::span<const int64_t> sources) override;
  Tensor extend(int64_t row, const std::vector<TokenId>& ids) override;
  void truncate(int64_t row, int64_t length) override;
  void set_greedy_process(runtime::GreedyRowProcess process) override { with_past_.set_greedy_process(std::move(process)); }
  // The with-past decoder keeps its heads only when they were asked for.
  int64_t draft_heads() const override { return with_past_.draft_heads(); }
  std::vector<TokenId> draft_guesses(int64_t at, size_t n) const override {
    return drafts_from_prefill_ ? runtime::draft_argmax(drafts_, at, n) : with_past_.draft_guesses(at, n);
  }
  // The with-past decoder's time per op type, when the session options asked for a profile.
  std::vector<OpTime> op_times() { return with_past_.op_times(); }

 private:
  bool one_input() const { return states_.defined() && states_.dim(0) == 1; }
  // The slot of cross_ that holds row's cross keys and values (0 for a single input).
  int64_t slot(int64_t row) const { return one_input() ? 0 : row; }
  // The with-past decoder's cross-attention inputs for rows [row, row + n).
  std::vector<NamedTensor> cross_inputs(int64_t row, int64_t n) const;
  // The last position's draft logits of the first decoder's output [1, positions, heads, vocab].
  void keep_last_drafts(const Tensor& drafts);

  std::unique_ptr<Session> first_;
  runtime::CachedDecoder with_past_;
  std::optional<runtime::KvCache> cache_;
  Tensor states_;
  int64_t rows_per_input_ = 1;
  std::vector<int64_t> cross_row_;  // per row: the row whose prompt made its cross keys and values (-1: none)
  std::vector<std::string> cross_names_;  // the with-past decoder's cross-attention inputs
  std::vector<Tensor> cross_;             // per cross input, [rows (1 for one input), heads, frames, dim]
  Tensor drafts_;                     // the last prefill's draft logits, [1, heads, vocab]
  bool drafts_from_prefill_ = false;  // else the last extend's, which with_past_ keeps
};

}  // namespace mminfer::generate
