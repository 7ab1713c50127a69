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
    stream = std::make_unique<TokenStream>(detokenize, StopRules::from_config(job.config), job.prompt.size(), cb);
  }
  bool cancelled() const { return listener_failed || (job.cancelled && job.cancelled->load()); }

  GenerationJob job;
  LogitsPipeline pipeline;
  Pcg32 rng;
  std::unique_ptr<TokenStream> stream;
  std::vector<TokenId> tokens;  // the prompt, then each new token
  std::vector<TokenId> key;     // what each position holds: the prefix key, then each new token
  int64_t row = -1;
  int64_t prefilled = 0;  // prompt positions in the cache
  int64_t reused = 0;     // of which another sequence made
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
  left_.resize(static_cast<size_t>(cache_.rows()));
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
  reuse_prefix(*s);
  prefilling_ = std::move(s);
  ++running_;
}

void ContinuousBatcher::reuse_prefix(Sequence& s) {
  const int64_t n = s.row;
  const std::vector<TokenId>& prompt = s.key;  // the prompt's key: no new token yet
  // At least the prompt's last token is fed again: its logits choose the first new token.
  const size_t most = s.job.prompt.size() - 1;
  int64_t best = 0, from = -1;
  auto consider = [&](int64_t row, std::span<const TokenId> held) {
    const size_t limit = std::min(held.size(), most);
    size_t m = 0;
    while (m < limit && held[m] == prompt[m]) ++m;
    if (static_cast<int64_t>(m) > best) best = static_cast<int64_t>(m), from = row;
  };
  for (const auto& d : decoding_) consider(d->row, std::span<const TokenId>(d->key).first(static_cast<size_t>(cache_.length(d->row))));
  for (int64_t r = n; r < cache_.rows(); ++r) consider(r, left_[r].key);
  // The row the sequence takes: an empty free row, else the one whose contents were used least
  // recently, so a reused prefix stays for the next prompt that shares it (copied, not taken).
  int64_t victim = -1;
  for (int64_t r = n; r < cache_.rows(); ++r) {
    if (r == from) continue;
    const Leftover &a = left_[r], &b = left_[victim < 0 ? r : victim];
    if (victim < 0 || (a.key.empty() && !b.key.empty()) || (a.key.empty() == b.key.empty() && a.used < b.used))
      victim = r;
  }
  if (victim < 0) victim = from;  // the only free row holds the prefix: taken in place
  if (victim != n) {
    std::vector<int64_t> at(static_cast<size_t>(cache_.rows()));
    for (int64_t r = 0; r < cache_.rows(); ++r) at[r] = r;
    std::swap(at[n], at[victim]);
    move_rows(at);
    if (from == n) from = victim;
  }
  if (from >= 0) left_[from].used = ++clock_;
  if (from >= 0 && from != n) cache_.copy_prefix(from, n, best);
  cache_.set_length(n, best);
  left_[n].key.clear();
  s.prefilled = s.reused = best;
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
  Tensor logits;
  try {
    Tensor input;
    if (s.job.prompt_embeddings.rank() > 0) {  // rows [prefilled, prefilled + n) of [1, prompt, width]
      const Tensor& e = s.job.prompt_embeddings;
      input = Tensor::alias(e, DType::kFloat32, {1, n, e.dim(2)}, const_cast<float*>(e.data<float>()) + s.prefilled * e.dim(2));
    } else {
      Tensor ids = Tensor::empty(DType::kInt64, {1, n});
      std::copy_n(s.job.prompt.begin() + s.prefilled, n, ids.data<int64_t>());
      input = options_.embed ? options_.embed(ids) : ids;
    }
    logits = decoder_.step(cache_, s.row, options_.tokens_input, input);
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
    logits = decoder_.step(cache_, 0, options_.tokens_input, options_.embed ? options_.embed(ids) : ids);
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
  s.key.push_back(token);
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
  r.reused_prompt_tokens = static_cast<size_t>(s.reused);
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

void ContinuousBatcher::move_rows(const std::vector<int64_t>& at) {
  bool moved = false;
  for (int64_t r = 0; r < cache_.rows(); ++r) moved = moved || at[r] != r;
  if (!moved) return;
  cache_.reorder(at);
  std::vector<Leftover> left(left_.size());
  for (int64_t r = 0; r < cache_.rows(); ++r) left[r] = std::move(left_[at[r]]);
  left_ = std::move(left);
}

void ContinuousBatcher::compact() {
  // What the ended sequences leave in their rows: the tokens whose keys and values are there.
  auto leave = [&](const Sequence& s) {
    const auto length = static_cast<size_t>(cache_.length(s.row));
    Leftover& left = left_[s.row];
    left.key.assign(s.key.begin(), s.key.begin() + static_cast<std::ptrdiff_t>(std::min(length, s.key.size())));
    left.used = ++clock_;
  };
  std::vector<std::unique_ptr<Sequence>> kept;
  for (auto& s : decoding_) {
    if (s->ended) leave(*s);
    else kept.push_back(std::move(s));
  }
  decoding_.clear();
  if (prefilling_ && prefilling_->ended) leave(*prefilling_), prefilling_.reset();
  // at[r]: the row whose contents row r holds afterwards. Running rows above the new count swap
  // with the holes below it, so an ended sequence's contents move up and stay reusable.
  const auto count = static_cast<int64_t>(kept.size());
  std::vector<int64_t> at(static_cast<size_t>(cache_.rows()));
  for (int64_t r = 0; r < cache_.rows(); ++r) at[r] = r;
  std::vector<bool> taken(static_cast<size_t>(count), false);
  for (auto& s : kept)
    if (s->row < count) taken[s->row] = true;
  int64_t hole = 0;
  for (auto& s : kept) {
    if (s->row < count) continue;
    while (taken[hole]) ++hole;
    taken[hole] = true;
    std::swap(at[hole], at[s->row]);
    s->row = hole;
  }
  if (prefilling_ && prefilling_->row != count) std::swap(at[count], at[prefilling_->row]), prefilling_->row = count;
  move_rows(at);
  for (int64_t r = 0; r < count; ++r) left_[r].key.clear();  // running rows: their sequences say what they hold
  if (prefilling_) left_[count].key.clear();
  std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) { return a->row < b->row; });
  decoding_ = std::move(kept);
}

}  // namespace mminfer::generate
