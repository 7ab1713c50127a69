// A content-addressed cache of results and intermediate features. Keys name the input by the
// SHA-256 of its raw bytes, so an image embedded once is not embedded again when it is later
// classified against new labels; values are opaque bytes (a serialized embedding, a JSON
// answer). Identical concurrent requests compute once (single-flight).
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>

namespace mminfer::serve {

struct CacheKey {
  std::string digest;      // SHA-256 (hex) of the raw input bytes
  std::string modality;    // "image", "text", "audio", ...
  std::string model;       // "name@version"
  std::string preprocess;  // SHA-256 (hex) of the preprocessing config
  std::string kind;        // "result", "feature", ...

  // Fields joined by '|' with '|' and '\' escaped, so different keys never collide.
  std::string to_string() const;

  static CacheKey for_bytes(std::string_view bytes, std::string modality, std::string model_at_version,
                            std::string_view preprocess_config, std::string kind = "result");
};

using CacheValue = std::shared_ptr<const std::string>;

enum class CachePolicy { kLru, kLfu, kFifo };
CachePolicy parse_cache_policy(std::string_view name);  // "lru", "lfu", "fifo"; throws Error
const char* cache_policy_name(CachePolicy policy);

struct CacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;        // lookups that found nothing, including those that joined a flight
  uint64_t evictions = 0;     // removed to make room
  uint64_t expirations = 0;   // removed because their TTL passed
  uint64_t bytes = 0;         // keys plus values held now
  uint64_t entries = 0;
  uint64_t computations = 0;  // compute calls made by get_or_compute
  uint64_t waits = 0;         // callers that joined another caller's computation
  uint64_t bypasses = 0;      // get_or_compute calls with bypass (no-cache)
  uint64_t refused = 0;       // values not stored because key + value exceed the budget
};

class ResultCache {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    CachePolicy policy = CachePolicy::kLru;
    size_t byte_budget = size_t{256} << 20;
    std::chrono::milliseconds ttl{0};  // 0: entries never expire
    std::chrono::milliseconds expiry_interval{1000};  // how often the background sweep runs
    std::function<Clock::time_point()> now;  // injectable for tests; empty: Clock::now
  };

  explicit ResultCache(Options options);
  ~ResultCache();  // stops the expiry thread
  ResultCache(const ResultCache&) = delete;
  ResultCache& operator=(const ResultCache&) = delete;

  CacheValue get(const CacheKey& key);  // nullptr when absent or expired
  void put(const CacheKey& key, CacheValue value);
  bool erase(const CacheKey& key);
  void clear();

  // The cached value, or compute()'s. Concurrent callers with the same key wait for the first
  // one's computation and share its value; if it throws, every one of them gets the exception and
  // nothing is stored. bypass (Cache-Control: no-cache) neither reads the cache nor joins a
  // flight, but stores the fresh value. compute is called without any lock held; a nullptr
  // value is passed back and not stored.
  CacheValue get_or_compute(const CacheKey& key, const std::function<CacheValue()>& compute,
                            bool bypass = false);

  size_t expire_now();  // removes expired entries at once; returns how many
  CacheStats stats() const;  // a consistent snapshot
  const Options& options() const { return options_; }

 private:
  using Rank = std::pair<uint64_t, uint64_t>;
  using ExpiryIndex = std::multimap<Clock::time_point, const std::string*>;
  struct Entry {
    CacheValue value;
    size_t bytes = 0;
    uint64_t inserted = 0;  // sequence number of the insert
    uint64_t uses = 1;      // for LFU
    Rank rank;              // its place in order_
    ExpiryIndex::iterator expiry;  // its place in expiry_ when ttl > 0
  };
  using Map = std::unordered_map<std::string, Entry>;

  Clock::time_point now() const;
  Rank rank_of(const Entry& e);
  void touch(Map::iterator it);
  void remove(Map::iterator it);
  void store(const std::string& key, CacheValue value);
  CacheValue lookup(const std::string& key);  // counts hits/misses; removes expired entries
  size_t expire_locked();
  void expiry_loop();

  Options options_;
  mutable std::mutex mu_;
  Map entries_;
  // Eviction order: begin() goes first. LRU ranks by last use, FIFO by insertion, LFU by
  // (uses, insertion). Values point at keys inside entries_, whose nodes never move.
  std::map<Rank, const std::string*> order_;
  ExpiryIndex expiry_;  // only when ttl > 0
  std::unordered_map<std::string, std::shared_future<CacheValue>> flights_;  // computing now
  uint64_t seq_ = 0;
  CacheStats stats_;

  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread expiry_thread_;
};

}  // namespace mminfer::serve
