// A decoder model whose KV cache the runtime owns (passes/bind_kv_cache): each step feeds only the
// new positions; keys and values stay in a KvCache, written in place, never copied back and forth.
#pragma once
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "mminfer/session.h"
#include "passes/bind_kv_cache.h"
#include "runtime/kv_cache.h"
#include "runtime/logits_head.h"

namespace mminfer::runtime {

class CachedDecoder {
 public:
  // Loads the ONNX file at `path` and binds its cache. Throws Error with a one-line reason when
  // the file cannot be loaded or its past inputs are not in a form the binding recognises.
  // `cache_dtype`: float32, float16 for half the cache's memory, or int8 (codes and a scale per
  // position and KV head) for a little over a quarter.
  CachedDecoder(const std::string& path, const SessionOptions& options, DType cache_dtype = DType::kFloat32);

  // A cache for `rows` sequences of up to `capacity` positions each.
  KvCache make_cache(int64_t rows, int64_t capacity) const;
  // What one cached position costs over every layer (keys and values).
  size_t cache_bytes_per_position() const { return KvCache::bytes_per_position(layers_, cache_dtype_); }

  const passes::KvCacheBinding& binding() const { return binding_; }
  bool has_input(const std::string& name) const;
  const std::vector<ValueInfo>& inputs() const { return session_->inputs(); }
  // Per-op time of the steps so far when SessionOptions::profile was set (then resets the window);
  // the output projection, when the runtime runs it, as "LogitsHead".
  std::vector<OpTime> op_times();

  // Whether the runtime runs the output projection (runtime/logits_head.h): a float32 decoder
  // whose logits are a MatMul on a constant, unless MMINFER_LOGITS_HEAD=graph.
  bool runs_logits_head() const { return head_ != nullptr; }
  // While set, step() over a KvCache returns rows that serve a greedy choice only: the argmax of
  // `process(cache row, logits)` is that of the full logits, but tokens that cannot win hold
  // bounds, not logits. `process` must be a non-decreasing map of each logit alone. Unset: the
  // full logits. No effect without the runtime's head. One loop at a time per decoder, as the
  // pipelines and the server's batcher run them.
  void set_greedy_process(GreedyRowProcess process) { greedy_ = std::move(process); }
  // Logits computed exactly by greedy steps so far, and the rows they came from.
  int64_t greedy_exact_logits() const { return greedy_exact_; }
  int64_t greedy_rows() const { return greedy_rows_; }
  // The first non-cache input (input_ids or inputs_embeds) and its dtype.
  const ValueInfo* input(const std::string& name) const;

  // Runs `tokens` ([n, S] int64 ids, or [n, S, d] float embeddings, under `tokens_name`) as the
  // next S positions of cache rows [row, row + n), plus `extra` inputs (encoder states...).
  // Returns the logits of each row's last position, [n, vocab], and advances the rows' lengths.
  Tensor step(KvCache& cache, int64_t row, const std::string& tokens_name, const Tensor& tokens,
              const std::vector<NamedTensor>& extra = {});
  // The next S positions of one row, as step() runs them, with the logits of every position:
  // [S, vocab] (a draft's proposals checked in one pass).
  Tensor step_positions(KvCache& cache, int64_t row, const std::string& tokens_name, const Tensor& tokens,
                        const std::vector<NamedTensor>& extra = {});
  // Draft heads (an output `draft_logits` [1, S, heads, vocab]: guesses of the tokens 2, 3, ...
  // positions past each position, Medusa-style): step_positions() keeps them, and
  // draft_guesses(at, n) returns each of the first n heads' most likely token after its call's
  // position `at`. Where the heads' last op is a product with a float32 constant, the runtime
  // runs it (as the logits head) for that one position only. Sessions loaded with the output
  // dropped (SessionOptions::drop_outputs) have none.
  static constexpr const char* kDraftOutput = "draft_logits";
  int64_t draft_heads() const { return draft_heads_; }
  std::vector<int64_t> draft_guesses(int64_t at, size_t n) const;
  // The same over a pool of blocks (`pool`'s rows are blocks): row r of `tokens` is the next S
  // positions of sequences[r], whose blocks must already cover them; advances their lengths.
  Tensor step(KvCache& pool, std::span<BlockList* const> sequences, const std::string& tokens_name, const Tensor& tokens,
              const std::vector<NamedTensor>& extra = {});

 private:
  // Sequences whose cache lengths differ step one by one when the graph reads the length as a
  // shape; `run` steps rows [first, first + n) of the batch.
  using RowsStep = std::function<Tensor(int64_t first, int64_t n, const Tensor& tokens, const std::vector<NamedTensor>& extra)>;
  Tensor split_unequal(const std::vector<int64_t>& lengths, const Tensor& tokens, const std::vector<NamedTensor>& extra,
                       const RowsStep& run);
  // One session run: `lengths` before the step, `table` the block table, `cache` the pool.
  // Returns each row's last logits [n, vocab], or with `every_position` all of them [n, S, vocab].
  Tensor run_step(KvCache& cache, const std::vector<int64_t>& lengths, const Tensor& table, const std::string& tokens_name,
                  const Tensor& tokens, const std::vector<NamedTensor>& extra, bool every_position = false);

  // The graph's output rows [n, width] as logits [n, vocab]: through the head when there is one,
  // for greedy rows starting at cache row `first_row` (-1: not greedy).
  Tensor to_logits(Tensor rows, int64_t first_row);

  std::unique_ptr<Session> session_;
  std::unique_ptr<LogitsHead> head_;
  std::string output_ = "logits";  // what the graph computes: the logits, or the head's input
  GreedyRowProcess greedy_;
  int threads_ = 0;
  int64_t greedy_exact_ = 0, greedy_rows_ = 0;
  double head_ms_ = 0;
  int64_t head_calls_ = 0;
  passes::KvCacheBinding binding_;
  std::vector<KvCache::Layer> layers_;
  DType cache_dtype_;
  bool rows_share_length_ = false;  // some input still depends on the past length's shape
  int64_t draft_heads_ = 0;
  std::string draft_output_;               // the draft logits, or the states draft_head_ reads out
  std::unique_ptr<LogitsHead> draft_head_;
  Tensor drafts_;                          // the last step_positions' [S, heads, vocab or d]
};

// Row `at` of draft logits [rows, heads, vocab]: the argmax of each of the first n heads. Throws
// std::invalid_argument when there is no such row or head.
std::vector<int64_t> draft_argmax(const Tensor& draft_logits, int64_t at, size_t n);

}  // namespace mminfer::runtime
