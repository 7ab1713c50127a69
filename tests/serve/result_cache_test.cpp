// ResultCache: eviction per policy, the byte budget, TTL with an injected clock, single-flight.
#include "serve/result_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "mminfer/status.h"
#include "serve/sha256.h"

namespace mminfer::serve {
namespace {

using namespace std::chrono_literals;
using Clock = ResultCache::Clock;

CacheKey key(const std::string& name) { return CacheKey{name, "image", "clip@1", "pre", "result"}; }

CacheValue value(size_t size, char fill = 'v') { return std::make_shared<const std::string>(size, fill); }

// Bytes one entry with a one-letter name and a 10-byte value takes.
size_t entry_bytes() { return key("a").to_string().size() + 10; }

ResultCache::Options budget_for(size_t entries, CachePolicy policy) {
  ResultCache::Options o;
  o.policy = policy;
  o.byte_budget = entries * entry_bytes();
  return o;
}

bool has(ResultCache& c, const std::string& name) { return c.get(key(name)) != nullptr; }

// A clock the test moves by hand.
struct FakeClock {
  std::atomic<int64_t> ms{0};
  std::function<Clock::time_point()> fn() {
    return [this] { return Clock::time_point(std::chrono::milliseconds(ms.load())); };
  }
};

TEST(CacheKey, FieldsNeverRunTogether) {
  CacheKey a{"d", "x|y", "m", "p", "result"};
  CacheKey b{"d", "x", "y|m", "p", "result"};
  EXPECT_NE(a.to_string(), b.to_string());
  CacheKey c{"d", "x\\", "|m", "p", "result"};
  CacheKey d{"d", "x\\|", "m", "p", "result"};
  EXPECT_NE(c.to_string(), d.to_string());
  EXPECT_EQ(CacheKey({"d", "image", "clip@1", "p", "feature"}).to_string(), "feature|image|clip@1|p|d");
}

TEST(CacheKey, ForBytesHashesInputAndPreprocessConfig) {
  CacheKey k = CacheKey::for_bytes("abc", "image", "clip@2", "{\"size\":224}", "feature");
  EXPECT_EQ(k.digest, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(k.preprocess, sha256_hex("{\"size\":224}"));
  EXPECT_EQ(k.model, "clip@2");
  EXPECT_EQ(k.kind, "feature");
  EXPECT_NE(k.to_string(), CacheKey::for_bytes("abc", "image", "clip@3", "{\"size\":224}", "feature").to_string());
  EXPECT_NE(k.to_string(), CacheKey::for_bytes("abc", "image", "clip@2", "{\"size\":336}", "feature").to_string());
  EXPECT_NE(k.to_string(), CacheKey::for_bytes("abd", "image", "clip@2", "{\"size\":224}", "feature").to_string());
}

TEST(CachePolicyName, ParsesAndRejects) {
  EXPECT_EQ(parse_cache_policy("lru"), CachePolicy::kLru);
  EXPECT_EQ(parse_cache_policy("lfu"), CachePolicy::kLfu);
  EXPECT_EQ(parse_cache_policy("fifo"), CachePolicy::kFifo);
  EXPECT_STREQ(cache_policy_name(CachePolicy::kLfu), "lfu");
  EXPECT_THROW(parse_cache_policy("random"), Error);
}

TEST(ResultCache, LruEvictsLeastRecentlyUsed) {
  ResultCache c(budget_for(3, CachePolicy::kLru));
  for (const char* n : {"a", "b", "c"}) c.put(key(n), value(10));
  ASSERT_TRUE(has(c, "a"));  // b is now the least recently used
  c.put(key("d"), value(10));
  EXPECT_FALSE(has(c, "b"));
  EXPECT_TRUE(has(c, "c"));  // now a is the least recently used
  c.put(key("e"), value(10));
  EXPECT_FALSE(has(c, "a"));
  EXPECT_TRUE(has(c, "c"));
  EXPECT_TRUE(has(c, "d"));
  EXPECT_TRUE(has(c, "e"));
  EXPECT_EQ(c.stats().evictions, 2u);
}

TEST(ResultCache, LfuEvictsLeastFrequentlyUsed) {
  ResultCache c(budget_for(3, CachePolicy::kLfu));
  for (const char* n : {"a", "b", "c"}) c.put(key(n), value(10));
  has(c, "a");
  has(c, "a");
  has(c, "b");  // uses: a 3, b 2, c 1
  c.put(key("d"), value(10));
  EXPECT_EQ(c.stats().evictions, 1u);
  EXPECT_FALSE(has(c, "c"));
  c.put(key("e"), value(10));  // d, used once, is below a and b
  EXPECT_FALSE(has(c, "d"));
  EXPECT_TRUE(has(c, "a"));
  EXPECT_TRUE(has(c, "b"));
}

TEST(ResultCache, LfuBreaksTiesByAge) {
  ResultCache c(budget_for(3, CachePolicy::kLfu));
  for (const char* n : {"a", "b", "c"}) c.put(key(n), value(10));
  c.put(key("d"), value(10));  // all used once: the oldest, a, goes
  c.put(key("e"), value(10));  // then b
  EXPECT_FALSE(has(c, "a"));
  EXPECT_FALSE(has(c, "b"));
  EXPECT_TRUE(has(c, "c"));
  EXPECT_TRUE(has(c, "d"));
  EXPECT_TRUE(has(c, "e"));
}

TEST(ResultCache, FifoEvictsOldestInsertWhateverItsUse) {
  ResultCache c(budget_for(3, CachePolicy::kFifo));
  for (const char* n : {"a", "b", "c"}) c.put(key(n), value(10));
  for (int i = 0; i < 5; ++i) has(c, "a");
  c.put(key("d"), value(10));
  EXPECT_FALSE(has(c, "a"));
  c.put(key("e"), value(10));
  EXPECT_FALSE(has(c, "b"));
  EXPECT_TRUE(has(c, "c"));
  EXPECT_TRUE(has(c, "d"));
  EXPECT_TRUE(has(c, "e"));
}

TEST(ResultCache, ByteBudgetIsExact) {
  ResultCache c(budget_for(3, CachePolicy::kLru));
  for (const char* n : {"a", "b", "c"}) c.put(key(n), value(10));
  CacheStats s = c.stats();
  EXPECT_EQ(s.bytes, 3 * entry_bytes());  // exactly full: nothing evicted
  EXPECT_EQ(s.entries, 3u);
  EXPECT_EQ(s.evictions, 0u);
  c.put(key("d"), value(10 + entry_bytes()));  // needs two entries' room
  s = c.stats();
  EXPECT_EQ(s.evictions, 2u);
  EXPECT_EQ(s.entries, 2u);
  EXPECT_EQ(s.bytes, 3 * entry_bytes());
  EXPECT_TRUE(has(c, "c"));
  EXPECT_TRUE(has(c, "d"));
}

TEST(ResultCache, BytesMatchWhatIsHeldUnderRandomLoad) {
  for (CachePolicy p : {CachePolicy::kLru, CachePolicy::kLfu, CachePolicy::kFifo}) {
    ResultCache::Options o;
    o.policy = p;
    o.byte_budget = 5000;
    ResultCache c(o);
    std::mt19937 rng(7);
    for (int i = 0; i < 2000; ++i) {
      std::string name = std::to_string(rng() % 60);
      if (rng() % 3) c.put(key(name), value(rng() % 400));
      else c.get(key(name));
      ASSERT_LE(c.stats().bytes, o.byte_budget);
    }
    size_t held = 0, entries = 0;
    for (int i = 0; i < 60; ++i) {
      std::string name = std::to_string(i);
      if (CacheValue v = c.get(key(name))) {
        held += key(name).to_string().size() + v->size();
        ++entries;
      }
    }
    EXPECT_EQ(c.stats().bytes, held) << cache_policy_name(p);
    EXPECT_EQ(c.stats().entries, entries) << cache_policy_name(p);
  }
}

TEST(ResultCache, OversizeEntryIsRefusedAndEvictsNothing) {
  ResultCache c(budget_for(3, CachePolicy::kLru));
  c.put(key("a"), value(10));
  c.put(key("b"), value(3 * entry_bytes() - entry_bytes() + 11));  // one byte over the budget
  EXPECT_FALSE(has(c, "b"));
  EXPECT_TRUE(has(c, "a"));
  CacheStats s = c.stats();
  EXPECT_EQ(s.refused, 1u);
  EXPECT_EQ(s.evictions, 0u);
  c.put(key("b"), value(3 * entry_bytes() - entry_bytes() + 10));  // exactly the budget
  EXPECT_TRUE(has(c, "b"));
  EXPECT_FALSE(has(c, "a"));
}

TEST(ResultCache, ReplacingAKeyKeepsTheCountsRight) {
  ResultCache c(budget_for(3, CachePolicy::kLru));
  c.put(key("a"), value(10, 'x'));
  c.put(key("a"), value(5, 'y'));
  CacheStats s = c.stats();
  EXPECT_EQ(s.entries, 1u);
  EXPECT_EQ(s.bytes, entry_bytes() - 5);
  EXPECT_EQ(*c.get(key("a")), "yyyyy");
  EXPECT_TRUE(c.erase(key("a")));
  EXPECT_FALSE(c.erase(key("a")));
  EXPECT_EQ(c.stats().bytes, 0u);
}

TEST(ResultCache, TtlHidesExpiredEntries) {
  FakeClock clock;
  ResultCache::Options o;
  o.ttl = 100ms;
  o.expiry_interval = std::chrono::hours(1);  // the sweep must not interfere here
  o.now = clock.fn();
  ResultCache c(o);
  c.put(key("a"), value(10));
  clock.ms = 60;
  c.put(key("b"), value(10));
  clock.ms = 99;
  EXPECT_TRUE(has(c, "a"));
  clock.ms = 100;
  EXPECT_FALSE(has(c, "a"));  // expired at exactly put + ttl
  EXPECT_TRUE(has(c, "b"));
  EXPECT_EQ(c.stats().expirations, 1u);
  clock.ms = 500;
  EXPECT_EQ(c.expire_now(), 1u);
  CacheStats s = c.stats();
  EXPECT_EQ(s.expirations, 2u);
  EXPECT_EQ(s.entries, 0u);
  EXPECT_EQ(s.bytes, 0u);
}

TEST(ResultCache, ExpiredEntriesLeaveBeforeLiveOnesAreEvicted) {
  FakeClock clock;
  ResultCache::Options o = budget_for(2, CachePolicy::kLru);
  o.ttl = 100ms;
  o.expiry_interval = std::chrono::hours(1);
  o.now = clock.fn();
  ResultCache c(o);
  c.put(key("a"), value(10));
  clock.ms = 50;
  c.put(key("b"), value(10));
  clock.ms = 120;  // a has expired, b has not
  c.put(key("c"), value(10));
  CacheStats s = c.stats();
  EXPECT_EQ(s.expirations, 1u);
  EXPECT_EQ(s.evictions, 0u);
  EXPECT_TRUE(has(c, "b"));
  EXPECT_TRUE(has(c, "c"));
}

TEST(ResultCache, BackgroundThreadRemovesExpiredEntries) {
  FakeClock clock;
  ResultCache::Options o;
  o.ttl = 10ms;
  o.expiry_interval = 2ms;
  o.now = clock.fn();
  ResultCache c(o);
  c.put(key("a"), value(10));
  c.put(key("b"), value(10));
  clock.ms = 5;
  std::this_thread::sleep_for(20ms);  // several sweeps: nothing due yet
  EXPECT_EQ(c.stats().entries, 2u);
  clock.ms = 10;
  for (int i = 0; i < 2500 && c.stats().entries; ++i) std::this_thread::sleep_for(2ms);
  CacheStats s = c.stats();
  EXPECT_EQ(s.entries, 0u);
  EXPECT_EQ(s.expirations, 2u);
  EXPECT_EQ(s.misses, 0u);  // removed by the sweep, not by a lookup
}

TEST(ResultCache, DestructorStopsTheSweepAtOnce) {
  auto t0 = std::chrono::steady_clock::now();
  {
    ResultCache::Options o;
    o.ttl = 1s;
    o.expiry_interval = std::chrono::hours(1);
    ResultCache c(o);
  }
  // Not a timing assertion on speed: an hour-long wait would mean the thread was not woken.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::minutes(1));
}

TEST(ResultCache, SingleFlightComputesOnceFor16Threads) {
  ResultCache c(ResultCache::Options{});
  std::atomic<int> calls{0};
  constexpr int kThreads = 16;
  auto compute = [&] {
    ++calls;
    // Hold the flight open until every other thread has joined it.
    while (c.stats().waits < kThreads - 1) std::this_thread::sleep_for(1ms);
    return value(100, 'r');
  };
  std::vector<CacheValue> got(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] { got[i] = c.get_or_compute(key("x"), compute); });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(calls.load(), 1);
  for (const CacheValue& v : got) EXPECT_EQ(v, got[0]);  // the very same bytes
  CacheStats s = c.stats();
  EXPECT_EQ(s.computations, 1u);
  EXPECT_EQ(s.waits, 15u);
  EXPECT_EQ(s.misses, 16u);
  EXPECT_EQ(s.entries, 1u);
  EXPECT_EQ(c.get_or_compute(key("x"), compute), got[0]);  // now a hit
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(c.stats().hits, 1u);
}

TEST(ResultCache, ExceptionReachesEveryWaiterAndNothingIsStored) {
  ResultCache c(ResultCache::Options{});
  std::atomic<int> calls{0};
  constexpr int kThreads = 4;
  auto failing = [&]() -> CacheValue {
    ++calls;
    while (c.stats().waits < kThreads - 1) std::this_thread::sleep_for(1ms);
    throw std::runtime_error("model exploded");
  };
  std::atomic<int> caught{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&] {
      try {
        c.get_or_compute(key("x"), failing);
      } catch (const std::runtime_error& e) {
        if (std::string(e.what()) == "model exploded") ++caught;
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(caught.load(), kThreads);
  EXPECT_EQ(c.stats().entries, 0u);
  EXPECT_EQ(*c.get_or_compute(key("x"), [&] { ++calls; return value(3, 'k'); }), "kkk");  // tried anew
  EXPECT_EQ(calls.load(), 2);
}

TEST(ResultCache, BypassComputesAndRefreshes) {
  ResultCache c(ResultCache::Options{});
  c.put(key("x"), value(3, 'o'));
  int calls = 0;
  CacheValue v = c.get_or_compute(key("x"), [&] { ++calls; return value(3, 'n'); }, /*bypass=*/true);
  EXPECT_EQ(*v, "nnn");
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(*c.get(key("x")), "nnn");  // the fresh value was stored
  CacheStats s = c.stats();
  EXPECT_EQ(s.bypasses, 1u);
  EXPECT_EQ(s.computations, 1u);
  EXPECT_EQ(s.hits, 1u);  // only the get above
  EXPECT_EQ(s.misses, 0u);
}

TEST(ResultCache, NullValuesArePassedBackNotStored) {
  ResultCache c(ResultCache::Options{});
  EXPECT_EQ(c.get_or_compute(key("x"), [] { return CacheValue(); }), nullptr);
  c.put(key("y"), nullptr);
  EXPECT_EQ(c.stats().entries, 0u);
}

TEST(ResultCache, StatsCountHitsAndMisses) {
  ResultCache c(ResultCache::Options{});
  EXPECT_EQ(c.get(key("a")), nullptr);
  c.put(key("a"), value(4));
  c.get(key("a"));
  c.get(key("a"));
  int calls = 0;
  c.get_or_compute(key("b"), [&] { ++calls; return value(6); });
  c.get_or_compute(key("b"), [&] { ++calls; return value(6); });
  CacheStats s = c.stats();
  EXPECT_EQ(s.hits, 3u);
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.computations, 1u);
  EXPECT_EQ(s.entries, 2u);
  EXPECT_EQ(s.bytes, key("a").to_string().size() + 4 + key("b").to_string().size() + 6);
  c.clear();
  EXPECT_EQ(c.stats().bytes, 0u);
  EXPECT_EQ(c.get(key("a")), nullptr);
}

}  // namespace
}  // namespace mminfer::serve
