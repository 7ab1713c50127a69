// Prometheus metrics: counters, gauges and histograms in labelled families, rendered in the text
// exposition format 0.0.4. Values are atomics, so the hot path never locks: look a labelled
// child up once (a small map under a mutex) and keep the reference, which lives as long as
// the Registry.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mminfer::serve::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;  // name, value

// What GET /metrics should answer with.
inline constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

class Counter {
 public:
  void inc(double amount = 1);  // throws Error on a negative amount: counters only go up
  // Follows a running total kept elsewhere (the cache's hit count, say): rises to `total`,
  // never falls, so a stale or smaller reading cannot make the counter go down.
  void advance_to(double total);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void inc(double amount = 1) { value_.fetch_add(amount, std::memory_order_relaxed); }
  void dec(double amount = 1) { value_.fetch_sub(amount, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  // bounds: finite, strictly increasing upper bounds; +Inf is implied. Throws Error otherwise.
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);  // counted in the first bucket whose bound is >= v

  struct Snapshot {
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf (== count)
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // per bucket, not cumulative; last is +Inf
  std::atomic<double> sum_{0};
};

// Request latencies in seconds: 0.5 ms to 10 s.
std::vector<double> latency_buckets();
// Batch sizes: 1, 2, 4, ..., 64.
std::vector<double> batch_size_buckets();

// `s` with every byte that is not part of well-formed UTF-8, and every control character but
// newline, replaced by U+FFFD: label values and help text come from clients and files, and one
// invalid byte would make the whole exposition unreadable to Prometheus.
std::string printable_text(std::string_view s);

class Registry {
 public:
  // The child of family `name` with these labels, made on first use. The first call fixes the
  // family's help and type (and a histogram's bounds); a later call that disagrees on type or
  // bounds, or an invalid metric or label name, throws Error. Label order does not matter.
  // Label values and help pass through printable_text.
  Counter& counter(std::string_view name, std::string_view help, const Labels& labels = {});
  Gauge& gauge(std::string_view name, std::string_view help, const Labels& labels = {});
  Histogram& histogram(std::string_view name, std::string_view help, const Labels& labels = {},
                       const std::vector<double>& bounds = latency_buckets());

  // Families by name, children by labels, each label set sorted by label name.
  std::string render() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Family {
    Type type;
    std::string help;
    std::vector<double> bounds;
    std::map<Labels, std::unique_ptr<Counter>> counters;
    std::map<Labels, std::unique_ptr<Gauge>> gauges;
    std::map<Labels, std::unique_ptr<Histogram>> histograms;
  };

  Family& family(std::string_view name, std::string_view help, Type type, const Labels& labels,
                 Labels& sorted);

  mutable std::mutex mu_;
  std::map<std::string, Family, std::less<>> families_;
};

}  // namespace mminfer::serve::metrics
