#include "serve/result_cache.h"

#include "mminfer/status.h"
#include "serve/sha256.h"

namespace mminfer::serve {

namespace {

void append_escaped(std::string& out, const std::string& field) {
  for (char c : field) {
    if (c == '|' || c == '\\') out += '\\';
    out += c;
  }
}

}  // namespace

std::string CacheKey::to_string() const {
  std::string s;
  s.reserve(kind.size() + modality.size() + model.size() + preprocess.size() + digest.size() + 4);
  bool first = true;
  for (const std::string* f : {&kind, &modality, &model, &preprocess, &digest}) {
    if (!first) s += '|';
    first = false;
    append_escaped(s, *f);
  }
  return s;
}

CacheKey CacheKey::for_bytes(std::string_view bytes, std::string modality, std::string model_at_version,
                             std::string_view preprocess_config, std::string kind) {
  return CacheKey{sha256_hex(bytes), std::move(modality), std::move(model_at_version),
                  sha256_hex(preprocess_config), std::move(kind)};
}

CachePolicy parse_cache_policy(std::string_view name) {
  if (name == "lru") return CachePolicy::kLru;
  if (name == "lfu") return CachePolicy::kLfu;
  if (name == "fifo") return CachePolicy::kFifo;
  throw Error("cache policy must be lru, lfu or fifo, got '" + std::string(name) + "'");
}

const char* cache_policy_name(CachePolicy policy) {
  switch (policy) {
    case CachePolicy::kLru: return "lru";
    case CachePolicy::kLfu: return "lfu";
    case CachePolicy::kFifo: return "fifo";
  }
  return "?";
}

ResultCache::ResultCache(Options options) : options_(std::move(options)) {
  if (options_.ttl.count() < 0) throw Error("cache ttl must not be negative");
  if (options_.ttl.count() > 0) {
    if (options_.expiry_interval.count() <= 0) throw Error("cache expiry interval must be positive");
    expiry_thread_ = std::thread([this] { expiry_loop(); });
  }
}

ResultCache::~ResultCache() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (expiry_thread_.joinable()) expiry_thread_.join();
}

ResultCache::Clock::time_point ResultCache::now() const { return options_.now ? options_.now() : Clock::now(); }

ResultCache::Rank ResultCache::rank_of(const Entry& e) {
  switch (options_.policy) {
    case CachePolicy::kLru: return {0, ++seq_};
    case CachePolicy::kLfu: return {e.uses, e.inserted};
    case CachePolicy::kFifo: return {0, e.inserted};
  }
  return {0, e.inserted};
}

void ResultCache::touch(Map::iterator it) {
  Entry& e = it->second;
  if (options_.policy == CachePolicy::kFifo) return;
  ++e.uses;
  auto node = order_.extract(e.rank);
  e.rank = rank_of(e);
  node.key() = e.rank;
  order_.insert(std::move(node));
}

void ResultCache::remove(Map::iterator it) {
  Entry& e = it->second;
  order_.erase(e.rank);
  if (options_.ttl.count() > 0) expiry_.erase(e.expiry);
  stats_.bytes -= e.bytes;
  --stats_.entries;
  entries_.erase(it);
}

void ResultCache::store(const std::string& key, CacheValue value) {
  if (auto old = entries_.find(key); old != entries_.end()) remove(old);
  const size_t bytes = key.size() + value->size();
  if (bytes > options_.byte_budget) {
    ++stats_.refused;
    return;
  }
  // Expired entries go first so that they are not counted as evictions.
  if (options_.ttl.count() > 0 && stats_.bytes + bytes > options_.byte_budget) expire_locked();
  while (stats_.bytes + bytes > options_.byte_budget) {
    remove(entries_.find(*order_.begin()->second));
    ++stats_.evictions;
  }
  auto [it, inserted] = entries_.try_emplace(key);
  Entry& e = it->second;
  e.value = std::move(value);
  e.bytes = bytes;
  e.inserted = ++seq_;
  e.rank = rank_of(e);
  order_.emplace(e.rank, &it->first);
  if (options_.ttl.count() > 0) e.expiry = expiry_.emplace(now() + options_.ttl, &it->first);
  stats_.bytes += bytes;
  ++stats_.entries;
}

CacheValue ResultCache::lookup(const std::string& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    ++stats_.misses;
    return nullptr;
  }
  if (options_.ttl.count() > 0 && it->second.expiry->first <= now()) {
    remove(it);
    ++stats_.expirations;
    ++stats_.misses;
    return nullptr;
  }
  ++stats_.hits;
  touch(it);
  return it->second.value;
}

size_t ResultCache::expire_locked() {
  const Clock::time_point t = now();
  size_t n = 0;
  while (!expiry_.empty() && expiry_.begin()->first <= t) {
    remove(entries_.find(*expiry_.begin()->second));
    ++n;
  }
  stats_.expirations += n;
  return n;
}

void ResultCache::expiry_loop() {
  std::unique_lock lk(mu_);
  while (!stop_cv_.wait_for(lk, options_.expiry_interval, [this] { return stopping_; })) expire_locked();
}

CacheValue ResultCache::get(const CacheKey& key) {
  const std::string k = key.to_string();
  std::lock_guard lk(mu_);
  return lookup(k);
}

void ResultCache::put(const CacheKey& key, CacheValue value) {
  if (!value) return;
  const std::string k = key.to_string();
  std::lock_guard lk(mu_);
  store(k, std::move(value));
}

bool ResultCache::erase(const CacheKey& key) {
  const std::string k = key.to_string();
  std::lock_guard lk(mu_);
  auto it = entries_.find(k);
  if (it == entries_.end()) return false;
  remove(it);
  return true;
}

void ResultCache::clear() {
  std::lock_guard lk(mu_);
  entries_.clear();
  order_.clear();
  expiry_.clear();
  stats_.bytes = 0;
  stats_.entries = 0;
}

CacheValue ResultCache::get_or_compute(const CacheKey& key, const std::function<CacheValue()>& compute,
                                       bool bypass) {
  const std::string k = key.to_string();
  if (bypass) {
    {
      std::lock_guard lk(mu_);
      ++stats_.bypasses;
      ++stats_.computations;
    }
    CacheValue v = compute();
    if (v) {
      std::lock_guard lk(mu_);
      store(k, v);
    }
    return v;
  }

  std::promise<CacheValue> promise;
  {
    std::unique_lock lk(mu_);
    if (CacheValue v = lookup(k)) return v;
    if (auto f = flights_.find(k); f != flights_.end()) {
      ++stats_.waits;
      std::shared_future<CacheValue> result = f->second;
      lk.unlock();
      return result.get();  // rethrows the leader's exception
    }
    flights_.emplace(k, promise.get_future().share());
    ++stats_.computations;
  }

  CacheValue v;
  std::exception_ptr error;
  try {
    v = compute();
  } catch (...) {
    error = std::current_exception();
  }
  {
    // Erase the flight and store in one step: a caller arriving now either hits or leads anew.
    // Should store throw, the promise dies unfulfilled and waiters get broken_promise, not a hang.
    std::lock_guard lk(mu_);
    flights_.erase(k);
    if (!error && v) store(k, v);
  }
  if (error) {
    promise.set_exception(error);
    std::rethrow_exception(error);
  }
  promise.set_value(v);
  return v;
}

size_t ResultCache::expire_now() {
  std::lock_guard lk(mu_);
  return expire_locked();
}

CacheStats ResultCache::stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

}  // namespace mminfer::serve
