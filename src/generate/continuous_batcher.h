// Continuous batching of generation requests over one decoder whose KV cache the runtime owns.
// Every decoding step runs all active sequences as one batch; a new request joins at the next
// step; prompts are prefilled in chunks between steps, so a long prompt delays the sequences
// already streaming by one chunk at a time, never by the whole prompt. Each sequence keeps its
// own logits processors, generator (seeded as `decode` seeds one) and stop rules, so its tokens
// do not depend on what else shares the batch.
//
// The active sequences hold the cache's first rows: when one ends, the last row swaps into its
// place, so a step is one call over neighbouring rows (one GEMM over the weights). A prompt being
// prefilled holds the row after them.
//
// Prompt prefixes are reused: a free row keeps the keys and values of the sequence that ended in
// it, and a new prompt starts from the longest prefix that a free row or a running sequence
// already holds (a shared system prompt, the earlier turns of a conversation), copied into the
// row it takes (an empty one, else the least recently used), so only the rest is prefilled.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "generate/decode_loop.h"
#include "runtime/cached_decoder.h"

namespace mminfer::generate {

struct JobResult {
  DecodedSequence sequence;  // reason kNone with `error` set when the decoder failed
  std::string error;
  bool cancelled = false;    // the job's cancel flag ended it
  size_t prompt_tokens = 0;
  size_t reused_prompt_tokens = 0;  // prompt positions whose keys and values another sequence made
  double queue_ms = 0;        // submitted to admitted
  double first_token_ms = 0;  // submitted to the first new token (0 when none was made)
  double total_ms = 0;        // submitted to done
};

struct GenerationJob {
  std::vector<TokenId> prompt;
  // A vision-language prompt as the decoder reads it, [1, prompt, width] (the image's features
  // over its tokens); rank 0 (unset): the prompt's ids go through BatcherOptions::embed, or as they are.
  Tensor prompt_embeddings;
  // What each prompt position holds, for reusing prefixes; empty: the prompt's ids. Image
  // positions must differ between images (their token id alone does not).
  std::vector<TokenId> prefix_key;
  GenerationConfig config;  // greedy or sampled; beam search is refused at submit
  uint64_t seed = 0;
  // Each new token with its newly printable text, on the batcher's thread, as it is made.
  std::function<void(TokenId token, std::string_view text)> on_text;
  // Exactly once, on the batcher's thread (or in ~ContinuousBatcher for jobs never admitted).
  std::function<void(JobResult)> on_done;
  // Set from any thread: the sequence ends at the next step and its cache row is freed.
  std::shared_ptr<std::atomic<bool>> cancelled;
};

struct BatcherOptions {
  int64_t max_sequences = 8;   // sequences that decode together (cache rows)
  int64_t context = 2048;      // positions one sequence may hold, prompt included
  size_t max_waiting = 64;     // accepted but not yet running; submit refuses beyond it
  int64_t prefill_chunk = 256;  // prompt positions per chunk between decoding steps
  std::string tokens_input = "input_ids";
  // Set for decoders fed inputs_embeds: ids [n, S] to embeddings [n, S, width].
  std::function<Tensor(const Tensor& ids)> embed;
};

class ContinuousBatcher {
 public:
  // Allocates the cache (max_sequences x context) at once; throws Error when it cannot.
  ContinuousBatcher(runtime::CachedDecoder& decoder, DecodeFn detokenize, BatcherOptions options);
  // Finishes every accepted job (they run to their end), then stops the thread.
  ~ContinuousBatcher();
  ContinuousBatcher(const ContinuousBatcher&) = delete;
  ContinuousBatcher& operator=(const ContinuousBatcher&) = delete;

  // Throws Error for a job that cannot run (no prompt, a prompt that leaves no room in the
  // context, beam search) and std::invalid_argument for bad settings (max_new_tokens 0, a
  // max_length the prompt fills); returns false, without calling on_done, when the waiting
  // queue is full.
  bool submit(GenerationJob job);

  const BatcherOptions& options() const { return options_; }
  size_t running() const { return running_.load(); }  // holding a cache row
  size_t waiting() const;
  size_t cache_bytes() const { return cache_bytes_; }
  uint64_t steps() const { return steps_.load(); }  // batched decoding steps so far

 private:
  struct Sequence;
  void loop();
  void admit();                 // takes the next waiting job into the row after the decoding ones
  void drop_cancelled();
  void prefill_chunk();          // one chunk of the sequence being prefilled
  void decode_step();            // one token for every decoding sequence
  // Takes the new token; true when the sequence ended.
  bool choose(Sequence& s, float* logits, size_t vocab);
  void finish(Sequence& s, std::string error = {});
  // Moves rows so that the unfinished sequences are again rows [0, n), the one being prefilled
  // row n; ended sequences' rows keep their contents as free rows.
  void compact();
  // Starts the admitted sequence in row n from the longest prefix of its prompt that a row holds.
  void reuse_prefix(Sequence& s);
  // Row r takes the contents (cache and leftover) of row at[r], a permutation.
  void move_rows(const std::vector<int64_t>& at);

  runtime::CachedDecoder& decoder_;
  DecodeFn detokenize_;
  BatcherOptions options_;
  runtime::KvCache cache_;
  size_t cache_bytes_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  bool stopping_ = false;

  // The batcher thread's own: decoding sequences in rows [0, n), then the one being prefilled.
  std::vector<std::unique_ptr<Sequence>> decoding_;
  std::unique_ptr<Sequence> prefilling_;
  // Per row, what a free row still holds for later prompts: the key of each position (empty:
  // nothing reusable) and when it was last made or reused (the least recent is overwritten first).
  struct Leftover {
    std::vector<TokenId> key;
    uint64_t used = 0;
  };
  std::vector<Leftover> left_;
  uint64_t clock_ = 0;
  std::atomic<size_t> running_{0};
  std::atomic<uint64_t> steps_{0};
  std::thread thread_;  // last: starts when everything above exists
};

}  // namespace mminfer::generate
