#include "generate/continuous_batcher.h"

#include <algorithm>
#include <chrono>

#include "generate/logits_pipeline.h"
#include "generate/next_token.h"
#include "generate/rng.h"

namespace mminfer::generate {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

struct ContinuousBatcher::Sequence {
  Sequence(GenerationJob j, const DecodeFn& detokenize)
      : job(std::move(j)), pipeline(job.config), rng(job.seed), tokens(job.prompt) {
    StreamCallback cb;
    if (job.on_text)
      cb = [this](TokenId token, std::string_view text) {
        try {
          job.on_text(token, text);
        } catch (...) {  // a listener's failure ends its own sequence, not the batcher
          listener_failed = true;
        }
      };
    stream = std::make_unique<TokenStream>(detokenize, StopRules::from_config(job.config), job.prompt.size(), cb);
  }
  bool cancelled() const { return listener_failed || (job.cancelled && job.cancelled->load()); }

  GenerationJob job;
  LogitsPipeline pipeline;
  Pcg32 rng;
  std::unique_ptr<TokenStream> stream;
  std::vector<TokenId> tokens;  // the prompt, then each new token
  int64_t row = -1;
  int64_t prefilled = 0;  // prompt positions in the cache
  bool ended = false;
  bool listener_failed = false;
  Clock::time_point submitted = Clock::now(), admitted, first_token;
};

ContinuousBatcher::ContinuousBatcher(runtime::CachedDecoder& decoder, DecodeFn detokenize, BatcherOptions options)
    : decoder_(decoder),
      detokenize_(std::move(detokenize)),
      options_(std::move(options)),
      cache_(decoder.make_cache(std::max<int64_t>(options_.max_sequences, 1), std::max<int64_t>(options_.context, 1))) {
  if (options_.max_sequences <= 0 || options_.context <= 1 || options_.prefill_chunk <= 0)
    throw Error("continuous batching needs max_sequences >= 1, a context of 2 positions or more and prefill_chunk >= 1");
  cache_bytes_ = cache_.bytes();
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
  if (job.config.num_beams > 1) throw Error("beam search does not batch with other sequences; use num_beams 1");
  const auto length = static_cast<int64_t>(job.prompt.size());
  if (length >= options_.context)
    throw Error("the prompt holds " + std::to_string(length) + " tokens; the context is " + std::to_string(options_.context) +
                " positions, so no token can follow it");
  auto s = std::make_unique<Sequence>(std::move(job), detokenize_);
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
  }
}

void ContinuousBatcher::admit() {
  if (static_cast<int64_t>(decoding_.size()) >= options_.max_sequences) return;
  std::unique_ptr<Sequence> s;
  {
    std::lock_guard lock(mutex_);
    if (waiting_.empty()) return;
    s = std::move(waiting_.front());
    waiting_.pop_front();
  }
  s->row = static_cast<int64_t>(decoding_.size());
  s->admitted = Clock::now();
  cache_.set_length(s->row, 0);
  prefilling_ = std::move(s);
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
  running_ += gone.size();  // never admitted, so not counted yet; finish() takes one off each
  for (auto& s : gone) finish(*s);
  bool any = false;
  for (auto& s : decoding_)
    if (s->cancelled()) s->ended = any = true, finish(*s);
  if (prefilling_ && prefilling_->cancelled()) prefilling_->ended = any = true, finish(*prefilling_);
  if (any) compact();
}

void ContinuousBatcher::prefill_chunk() {
  Sequence& s = *prefilling_;
  const auto prompt = static_cast<int64_t>(s.job.prompt.size());
  const int64_t n = std::min(options_.prefill_chunk, prompt - s.prefilled);
  Tensor ids = Tensor::empty(DType::kInt64, {1, n});
  std::copy_n(s.job.prompt.begin() + s.prefilled, n, ids.data<int64_t>());
  Tensor logits;
  try {
    logits = decoder_.step(cache_, s.row, options_.tokens_input, ids);
  } catch (const std::exception& e) {
    s.ended = true;
    finish(s, e.what());
    compact();
    return;
  }
  s.prefilled += n;
  if (s.prefilled < prompt) return;
  if (choose(s, logits.data<float>(), static_cast<size_t>(logits.dim(1)))) {
    s.ended = true;
    finish(s);
    compact();
    return;
  }
  decoding_.push_back(std::move(prefilling_));
}

void ContinuousBatcher::decode_step() {
  const auto n = static_cast<int64_t>(decoding_.size());
  Tensor ids = Tensor::empty(DType::kInt64, {n, 1});
  for (int64_t r = 0; r < n; ++r) ids.data<int64_t>()[r] = decoding_[r]->tokens.back();
  Tensor logits;
  try {
    logits = decoder_.step(cache_, 0, options_.tokens_input, ids);
  } catch (const std::exception& e) {
    for (auto& s : decoding_) s->ended = true, finish(*s, e.what());
    compact();
    return;
  }
  ++steps_;
  const auto vocab = static_cast<size_t>(logits.dim(1));
  bool any = false;
  for (int64_t r = 0; r < n; ++r) {
    Sequence& s = *decoding_[r];
    if (choose(s, logits.data<float>() + r * vocab, vocab)) s.ended = any = true, finish(s);
  }
  if (any) compact();
}

bool ContinuousBatcher::choose(Sequence& s, float* logits, size_t vocab) {
  TokenId token = next_token(std::span<float>(logits, vocab), s.tokens, s.job.prompt.size(), s.pipeline, s.rng);
  s.tokens.push_back(token);
  if (s.stream->tokens().empty()) s.first_token = Clock::now();
  // A sequence at the cache's end stops as at max_length.
  if (s.stream->push(token) == StopReason::kNone && cache_.length(s.row) + 1 > cache_.capacity()) s.stream->finish();
  return s.stream->stopped() || s.listener_failed;
}

void ContinuousBatcher::finish(Sequence& s, std::string error) {
  JobResult r;
  r.cancelled = s.cancelled() && error.empty() && !s.stream->stopped();
  r.error = std::move(error);
  r.sequence.tokens = s.stream->tokens();
  r.sequence.text = s.stream->text();
  r.sequence.reason = s.stream->reason();
  r.prompt_tokens = s.job.prompt.size();
  const Clock::time_point now = Clock::now();
  if (s.row >= 0) r.queue_ms = ms_between(s.submitted, s.admitted);
  if (!r.sequence.tokens.empty()) r.first_token_ms = ms_between(s.submitted, s.first_token);
  r.total_ms = ms_between(s.submitted, now);
  --running_;
  if (s.job.on_done) try {
      s.job.on_done(std::move(r));
    } catch (...) {  // the listener's problem; the batcher goes on
    }
  s.job.on_done = nullptr;
}

void ContinuousBatcher::compact() {
  std::vector<std::unique_ptr<Sequence>> kept;
  for (auto& s : decoding_)
    if (!s->ended) kept.push_back(std::move(s));
  decoding_.clear();
  if (prefilling_ && prefilling_->ended) prefilling_.reset();
  // Rows below the new count stay where they are; the others move into the holes.
  const auto count = static_cast<int64_t>(kept.size());
  std::vector<bool> taken(static_cast<size_t>(count), false);
  for (auto& s : kept)
    if (s->row < count) taken[s->row] = true;
  std::vector<int64_t> sources(static_cast<size_t>(cache_.rows()));
  for (int64_t r = 0; r < cache_.rows(); ++r) sources[r] = r;
  int64_t hole = 0;
  bool moved = false;
  for (auto& s : kept) {
    if (s->row < count) continue;
    while (taken[hole]) ++hole;
    taken[hole] = true;
    sources[hole] = s->row, s->row = hole, moved = true;
  }
  if (prefilling_ && prefilling_->row != count) sources[count] = prefilling_->row, prefilling_->row = count, moved = true;
  if (moved) cache_.reorder(sources);
  std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) { return a->row < b->row; });
  decoding_ = std::move(kept);
}

}  // namespace mminfer::generate
