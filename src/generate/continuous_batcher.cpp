#include "generate/continuous_batcher.h"

#include <algorithm>
#include <chrono>

#include "core/elapsed.h"
#include "generate/logits_pipeline.h"
#include "generate/next_token.h"
#include "generate/rng.h"

namespace mminfer::generate {

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

struct ContinuousBatcher::Sequence {
  Sequence(GenerationJob j, const DecodeFn& detokenize)
      : job(std::move(j)), pipeline(job.config), rng(job.seed), tokens(job.prompt),
        key(job.prefix_key.empty() ? job.prompt : job.prefix_key) {
    StreamCallback cb;
    if (job.on_text)
      cb = [this](TokenId token, std::string_view text) {
        try {
          job.on_text(token, text);
        } catch (...) {  // a listener's failure ends its own sequence, not the batcher
          listener_failed = true;
        }
      };
    stream = std::make_unique<TokenStream>(job.detokenize ? job.detokenize : detokenize, StopRules::from_config(job.config),
                                           job.prompt.size(), cb);
  }
  bool cancelled() const { return listener_failed || (job.cancelled && job.cancelled->load()); }
  int64_t prompt_length() const { return static_cast<int64_t>(job.prompt.size()); }

  GenerationJob job;
  LogitsPipeline pipeline;
  Pcg32 rng;
  std::unique_ptr<TokenStream> stream;
  std::vector<TokenId> tokens;  // the prompt, then each new token
  std::vector<TokenId> key;     // what each position holds: the prefix key, then each new token
  runtime::BlockList cache;     // its blocks and the positions they hold
  int64_t target = 0;           // positions to prefill: the prompt, or on resuming all of tokens
  int64_t published = 0;        // leading blocks published (or found published)
  uint64_t last_key = 0;        // the key of the last of them
  int64_t reused = 0;           // prompt positions another sequence made
  size_t preemptions = 0;
  uint64_t admission = 0;       // the newest admitted is preempted first
  bool ended = false;
  bool listener_failed = false;
  bool ever_admitted = false;
  Clock::time_point submitted = Clock::now(), admitted, first_token;
};

namespace {

int64_t blocks_for(int64_t positions, int64_t block) { return (positions + block - 1) / block; }

}  // namespace

ContinuousBatcher::ContinuousBatcher(runtime::CachedDecoder& decoder, DecodeFn detokenize, BatcherOptions options)
    : decoder_(decoder),
      detokenize_(std::move(detokenize)),
      options_(std::move(options)),
      pool_([&] {
        if (options_.max_sequences <= 0 || options_.context <= 1 || options_.prefill_chunk <= 0 || options_.block_size <= 0 ||
            options_.kv_blocks < 0)
          throw Error("continuous batching needs max_sequences >= 1, a context of 2 positions or more, prefill_chunk >= 1, "
                      "block_size >= 1 and kv_blocks >= 0");
        if (options_.kv_blocks == 0) options_.kv_blocks = options_.max_sequences * blocks_for(options_.context, options_.block_size);
        return runtime::KvBlockPool(decoder.make_cache(options_.kv_blocks, options_.block_size));
      }()) {
  cache_bytes_ = pool_.storage().bytes();
  count_blocks();
  thread_ = std::thread([this] { loop(); });
}

ContinuousBatcher::~ContinuousBatcher() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

bool ContinuousBatcher::submit(GenerationJob job) {
  if (job.prompt.empty()) throw Error("the prompt has no tokens");
  if (!job.prefix_key.empty() && job.prefix_key.size() != job.prompt.size())
    throw Error("a prefix key needs one entry per prompt position");
  if (job.prompt_embeddings.rank() > 0 &&
      (job.prompt_embeddings.rank() != 3 || job.prompt_embeddings.dim(1) != static_cast<int64_t>(job.prompt.size())))
    throw Error("prompt embeddings must be [1, prompt positions, width]");
  if (job.config.num_beams > 1) throw Error("beam search does not batch with other sequences; use num_beams 1");
  const auto length = static_cast<int64_t>(job.prompt.size());
  if (length >= options_.context)
    throw Error("the prompt holds " + std::to_string(length) + " tokens; the context is " + std::to_string(options_.context) +
                " positions, so no token can follow it");
  if (blocks_for(length + 1, options_.block_size) > options_.kv_blocks)
    throw Error("the prompt holds " + std::to_string(length) + " tokens; the KV cache's " + std::to_string(options_.kv_blocks) +
                " blocks of " + std::to_string(options_.block_size) + " positions hold " +
                std::to_string(options_.kv_blocks * options_.block_size - 1) + " at most");
  auto s = std::make_unique<Sequence>(std::move(job), detokenize_);
  s->target = length;
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || waiting_.size() >= options_.max_waiting) return false;
    waiting_.push_back(std::move(s));
  }
  wake_.notify_one();
  return true;
}

size_t ContinuousBatcher::waiting() const {
  std::lock_guard lock(mutex_);
  return waiting_.size();
}

void ContinuousBatcher::loop() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !waiting_.empty() || !decoding_.empty() || prefilling_; });
      if (stopping_ && waiting_.empty() && decoding_.empty() && !prefilling_) return;
    }
    drop_cancelled();
    if (!prefilling_) admit();
    if (prefilling_) prefill_chunk();
    if (!decoding_.empty()) decode_step();
    count_blocks();
  }
}

void ContinuousBatcher::admit() {
  if (static_cast<int64_t>(decoding_.size()) >= options_.max_sequences) return;
  Sequence* s = nullptr;
  {
    std::lock_guard lock(mutex_);
    if (waiting_.empty()) return;
    s = waiting_.front().get();
  }
  // The longest run of published blocks that starts its positions; at least the last position
  // is fed again, as its logits choose the next token.
  const int64_t block = options_.block_size;
  const std::span<const TokenId> key(s->key.data(), static_cast<size_t>(s->target));
  std::vector<int32_t> found;
  uint64_t parent = 0;
  while (static_cast<int64_t>(found.size() + 1) * block <= s->target - 1) {
    auto positions = key.subspan(found.size() * block, static_cast<size_t>(block));
    const int32_t b = pool_.find(parent, positions);
    if (b < 0) break;
    found.push_back(b);
    parent = runtime::KvBlockPool::chain(parent, positions);
  }
  // Its blocks for the rest of the prefill, and one to grow into, must be available.
  const int64_t need = blocks_for(s->target + 1, block) - static_cast<int64_t>(found.size());
  if (pool_.available() < need) {
    for (int32_t b : found) pool_.give_back(b);
    if (pool_.held() > 0) return;  // blocks come back as others end
    // Nothing else runs and the pool still cannot hold it (a resumed sequence that had filled
    // it): it ends as at its context's end.
    std::unique_ptr<Sequence> done;
    {
      std::lock_guard lock(mutex_);
      done = std::move(waiting_.front());
      waiting_.pop_front();
    }
    ++running_;  // finish() takes it off
    done->stream->finish();
    finish(*done);
    return;
  }
  std::unique_ptr<Sequence> taken;
  {
    std::lock_guard lock(mutex_);
    taken = std::move(waiting_.front());
    waiting_.pop_front();
  }
  s->cache.blocks = std::move(found);
  s->cache.length = static_cast<int64_t>(s->cache.blocks.size()) * block;
  s->published = static_cast<int64_t>(s->cache.blocks.size());
  s->last_key = parent;
  while (static_cast<int64_t>(s->cache.blocks.size()) < blocks_for(s->target, block)) s->cache.blocks.push_back(pool_.take());
  if (!s->ever_admitted) {
    s->admitted = Clock::now();
    s->reused = std::min(s->cache.length, s->prompt_length());
    s->ever_admitted = true;
  }
  s->admission = ++admissions_;
  prefilling_ = std::move(taken);
  ++running_;
}

void ContinuousBatcher::drop_cancelled() {
  std::vector<std::unique_ptr<Sequence>> gone;
  {
    std::lock_guard lock(mutex_);
    for (auto it = waiting_.begin(); it != waiting_.end();)
      if ((*it)->cancelled()) gone.push_back(std::move(*it)), it = waiting_.erase(it);
      else ++it;
  }
  running_ += gone.size();  // not running now, so not counted; finish() takes one off each
  for (auto& s : gone) finish(*s);
  for (auto& s : decoding_)
    if (s->cancelled()) s->ended = true, finish(*s);
  if (prefilling_ && prefilling_->cancelled()) prefilling_->ended = true, finish(*prefilling_);
  remove_ended();
}

void ContinuousBatcher::prefill_chunk() {
  Sequence& s = *prefilling_;
  const int64_t at = s.cache.length, prompt = s.prompt_length();
  int64_t n = std::min(options_.prefill_chunk, s.target - at);
  // Prompt embeddings and the embedded ids of later tokens go in separate chunks.
  const bool embedded = s.job.prompt_embeddings.rank() > 0 && at < prompt;
  if (embedded) n = std::min(n, prompt - at);
  Tensor logits;
  try {
    Tensor input;
    if (embedded) {  // rows [at, at + n) of [1, prompt, width]
      const Tensor& e = s.job.prompt_embeddings;
      input = Tensor::alias(e, DType::kFloat32, {1, n, e.dim(2)}, const_cast<float*>(e.data<float>()) + at * e.dim(2));
    } else {
      Tensor ids = Tensor::empty(DType::kInt64, {1, n});
      std::copy_n(s.tokens.begin() + at, n, ids.data<int64_t>());
      input = options_.embed ? options_.embed(ids) : ids;
    }
    runtime::BlockList* one[] = {&s.cache};
    logits = decoder_.step(pool_.storage(), one, options_.tokens_input, input);
  } catch (const std::exception& e) {
    s.ended = true;
    finish(s, e.what());
    remove_ended();
    return;
  }
  publish_full_blocks(s);
  if (s.cache.length < s.target) return;
  if (choose(s, logits.data<float>(), static_cast<size_t>(logits.dim(1)))) {
    s.ended = true;
    finish(s);
    remove_ended();
    return;
  }
  decoding_.push_back(std::move(prefilling_));
}

bool ContinuousBatcher::grow(Sequence& s) {
  while (s.cache.length >= static_cast<int64_t>(s.cache.blocks.size()) * options_.block_size) {
    const int32_t b = pool_.take();
    if (b >= 0) {
      s.cache.blocks.push_back(b);
      continue;
    }
    // The newest running sequence makes room: the one being prefilled, else the last admitted.
    if (prefilling_) {
      preempt(std::move(prefilling_));
      continue;
    }
    if (decoding_.size() == 1) {  // alone and out of blocks: it ends as at its context's end
      s.stream->finish();
      s.ended = true;
      finish(s);
      return false;
    }
    const bool itself = decoding_.back().get() == &s;  // decoding_ is in admission order
    std::unique_ptr<Sequence> victim = std::move(decoding_.back());
    decoding_.pop_back();
    preempt(std::move(victim));
    if (itself) return false;
  }
  return true;
}

void ContinuousBatcher::preempt(std::unique_ptr<Sequence> s) {
  release(*s);
  s->target = static_cast<int64_t>(s->tokens.size());  // its prompt and its tokens so far
  ++s->preemptions;
  ++preemptions_;
  --running_;
  std::lock_guard lock(mutex_);
  waiting_.push_front(std::move(s));
}

void ContinuousBatcher::decode_step() {
  // Room for one more position each, oldest first: when blocks run out, the newest go, and a
  // sequence that cannot grow is the last one left.
  std::sort(decoding_.begin(), decoding_.end(), [](const auto& a, const auto& b) { return a->admission < b->admission; });
  for (size_t i = 0; i < decoding_.size(); ++i)
    if (!grow(*decoding_[i])) break;
  remove_ended();
  if (decoding_.empty()) return;
  const auto n = static_cast<int64_t>(decoding_.size());
  Tensor ids = Tensor::empty(DType::kInt64, {n, 1});
  std::vector<runtime::BlockList*> lists;
  for (int64_t r = 0; r < n; ++r) ids.data<int64_t>()[r] = decoding_[r]->tokens.back(), lists.push_back(&decoding_[r]->cache);
  Tensor logits;
  try {
    logits = decoder_.step(pool_.storage(), lists, options_.tokens_input, options_.embed ? options_.embed(ids) : ids);
  } catch (const std::exception& e) {
    for (auto& s : decoding_) s->ended = true, finish(*s, e.what());
    remove_ended();
    return;
  }
  ++steps_;
  const auto vocab = static_cast<size_t>(logits.dim(1));
  for (int64_t r = 0; r < n; ++r) {
    Sequence& s = *decoding_[r];
    publish_full_blocks(s);
    if (choose(s, logits.data<float>() + r * vocab, vocab)) s.ended = true, finish(s);
  }
  remove_ended();
}

bool ContinuousBatcher::choose(Sequence& s, float* logits, size_t vocab) {
  TokenId token = next_token(std::span<float>(logits, vocab), s.tokens, s.job.prompt.size(), s.pipeline, s.rng);
  s.tokens.push_back(token);
  s.key.push_back(token);
  if (s.stream->tokens().empty()) s.first_token = Clock::now();
  // A sequence at the context's end stops as at max_length.
  if (s.stream->push(token) == StopReason::kNone && s.cache.length + 1 > options_.context) s.stream->finish();
  return s.stream->stopped() || s.listener_failed;
}

void ContinuousBatcher::publish_full_blocks(Sequence& s) {
  const int64_t block = options_.block_size;
  while ((s.published + 1) * block <= s.cache.length) {
    std::span<const TokenId> positions(s.key.data() + s.published * block, static_cast<size_t>(block));
    pool_.publish(s.cache.blocks[s.published], s.last_key, positions);
    s.last_key = runtime::KvBlockPool::chain(s.last_key, positions);
    ++s.published;
  }
}

void ContinuousBatcher::release(Sequence& s) {
  for (int32_t b : s.cache.blocks) pool_.give_back(b);
  s.cache = {};
  s.published = 0;
  s.last_key = 0;
}

void ContinuousBatcher::finish(Sequence& s, std::string error) {
  release(s);
  JobResult r;
  r.cancelled = s.cancelled() && error.empty() && !s.stream->stopped();
  r.error = std::move(error);
  r.sequence.tokens = s.stream->tokens();
  r.sequence.text = s.stream->text();
  r.sequence.reason = s.stream->reason();
  r.prompt_tokens = s.job.prompt.size();
  r.reused_prompt_tokens = static_cast<size_t>(s.reused);
  r.preemptions = s.preemptions;
  const Clock::time_point now = Clock::now();
  if (s.ever_admitted) r.queue_ms = ms_between(s.submitted, s.admitted);
  if (!r.sequence.tokens.empty()) r.first_token_ms = ms_between(s.submitted, s.first_token);
  r.total_ms = ms_between(s.submitted, now);
  --running_;
  if (s.job.on_done) try {
      s.job.on_done(std::move(r));
    } catch (...) {  // the listener's problem; the batcher goes on
    }
  s.job.on_done = nullptr;
}

void ContinuousBatcher::remove_ended() {
  std::erase_if(decoding_, [](const auto& s) { return s->ended; });
  if (prefilling_ && prefilling_->ended) prefilling_.reset();
}

void ContinuousBatcher::count_blocks() {
  blocks_held_ = pool_.held();
  blocks_cached_ = pool_.cached();
}

}  // namespace mminfer::generate
