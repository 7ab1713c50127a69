// Continuous batching of generation requests over one decoder whose KV cache the runtime owns.
// Every decoding step runs all active sequences as one batch; a new request joins at the next
// step; prompts are prefilled in chunks between steps, so a long prompt delays the sequences
// already streaming by one chunk at a time, never by the whole prompt. Each sequence keeps its
// own logits processors, generator (seeded as `decode` seeds one) and stop rules, so its tokens
// do not depend on what else shares the batch.
//
// The cache is paged (runtime/kv_block_pool.h): a sequence takes fixed-size blocks as it grows and
// gives them back when it ends or its client goes away. A waiting prompt is admitted when the
// blocks it needs are available. When a running sequence cannot grow, the newest one is preempted:
// it gives its blocks back and waits at the head of the queue, and resumes by prefilling what it
// had (the prompt and its tokens so far) with the same generator state, so its output is the one
// it would have made without the interruption.
//
// Prompt prefixes are reused: each full block is published under the key of everything up to its
// end, and a new prompt starts from the longest run of published blocks that matches it (a shared
// system prompt, the earlier turns of a conversation, a preempted sequence's own blocks), held
// in common, so only the rest is prefilled.
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
#include "runtime/kv_block_pool.h"

namespace mminfer::generate {

struct JobResult {
  DecodedSequence sequence;  // reason kNone with `error` set when the decoder failed
  std::string error;
  bool cancelled = false;    // the job's cancel flag ended it
  size_t prompt_tokens = 0;
  size_t reused_prompt_tokens = 0;  // prompt positions whose keys and values another sequence made
  size_t preemptions = 0;           // times it gave its blocks back to let others grow
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
  DecodeFn detokenize;      // its text; unset: the batcher's
  uint64_t seed = 0;
  // Each new token with its newly printable text, on the batcher's thread, as it is made.
  std::function<void(TokenId token, std::string_view text)> on_text;
  // Exactly once, on the batcher's thread (or in ~ContinuousBatcher for jobs never admitted).
  std::function<void(JobResult)> on_done;
  // Set from any thread: the sequence ends at the next step and its cache blocks are given back.
  std::shared_ptr<std::atomic<bool>> cancelled;
};

struct BatcherOptions {
  int64_t max_sequences = 8;    // sequences that decode together
  int64_t context = 2048;       // positions one sequence may hold, prompt included
  size_t max_waiting = 64;      // accepted but not yet running; submit refuses beyond it
  int64_t prefill_chunk = 256;  // prompt positions per chunk between decoding steps
  int64_t block_size = 16;      // positions per KV cache block
  int64_t kv_blocks = 0;        // blocks in the pool; 0: max_sequences whole contexts
  std::string tokens_input = "input_ids";
  // Set for decoders fed inputs_embeds: ids [n, S] to embeddings [n, S, width].
  std::function<Tensor(const Tensor& ids)> embed;
};

class ContinuousBatcher {
 public:
  // Allocates the block pool at once; throws Error when it cannot.
  ContinuousBatcher(runtime::CachedDecoder& decoder, DecodeFn detokenize, BatcherOptions options);
  // Finishes every accepted job (they run to their end), then stops the thread.
  ~ContinuousBatcher();
  ContinuousBatcher(const ContinuousBatcher&) = delete;
  ContinuousBatcher& operator=(const ContinuousBatcher&) = delete;

  // Throws Error for a job that cannot run (no prompt, a prompt that leaves no room in the
  // context or needs more blocks than the pool has, beam search) and std::invalid_argument for
  // bad settings (max_new_tokens 0, a max_length the prompt fills); returns false, without
  // calling on_done, when the waiting queue is full.
  bool submit(GenerationJob job);

  const BatcherOptions& options() const { return options_; }
  size_t running() const { return running_.load(); }  // admitted, holding cache blocks
  size_t waiting() const;
  size_t cache_bytes() const { return cache_bytes_; }
  int64_t kv_blocks() const { return options_.kv_blocks; }
  int64_t kv_blocks_held() const { return blocks_held_.load(); }      // by running sequences
  int64_t kv_blocks_cached() const { return blocks_cached_.load(); }  // a published prefix nobody holds
  uint64_t preemptions() const { return preemptions_.load(); }
  uint64_t steps() const { return steps_.load(); }  // batched decoding steps so far

 private:
  struct Sequence;
  void loop();
  void admit();  // takes the next waiting job when its blocks are available
  void drop_cancelled();
  void prefill_chunk();  // one chunk of the sequence being prefilled
  void decode_step();    // one token for every decoding sequence
  // A block for `s` to grow into, preempting the newest sequences while none is available;
  // false when `s` itself had to go (preempted, or ended when nothing else could).
  bool grow(Sequence& s);
  void preempt(std::unique_ptr<Sequence> s);
  // Takes the new token; true when the sequence ended.
  bool choose(Sequence& s, float* logits, size_t vocab);
  void publish_full_blocks(Sequence& s);
  void release(Sequence& s);
  void finish(Sequence& s, std::string error = {});
  void remove_ended();
  void count_blocks();

  runtime::CachedDecoder& decoder_;
  DecodeFn detokenize_;
  BatcherOptions options_;
  runtime::KvBlockPool pool_;
  size_t cache_bytes_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  bool stopping_ = false;

  // The batcher thread's own: the decoding sequences and the one being prefilled.
  std::vector<std::unique_ptr<Sequence>> decoding_;
  std::unique_ptr<Sequence> prefilling_;
  uint64_t admissions_ = 0;
  std::atomic<size_t> running_{0};
  std::atomic<int64_t> blocks_held_{0}, blocks_cached_{0};
  std::atomic<uint64_t> steps_{0}, preemptions_{0};
  std::thread thread_;  // last: starts when everything above exists
};

}  // namespace mminfer::generate
