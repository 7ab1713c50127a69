// Prometheus metrics: the exact text exposition, escaping, cumulative buckets, concurrency.
#include "serve/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "mminfer/status.h"

namespace mminfer::serve::metrics {
namespace {

TEST(Metrics, RendersExactText) {
  Registry r;
  r.counter("mminfer_requests_total", "Requests received", {{"model", "clip"}, {"code", "200"}}).inc();
  r.counter("mminfer_requests_total", "Requests received", {{"code", "200"}, {"model", "clip"}}).inc(2);
  r.counter("mminfer_requests_total", "Requests received", {{"model", "clip"}, {"code", "429"}}).inc();
  r.gauge("mminfer_queue_depth", "Requests waiting").set(7.5);
  Histogram& h = r.histogram("mminfer_batch_size", "Requests per batch", {{"model", "clip"}}, {1, 2, 4});
  h.observe(1);
  h.observe(3);
  h.observe(9);
  EXPECT_EQ(r.render(),
            "# HELP mminfer_batch_size Requests per batch\n"
            "# TYPE mminfer_batch_size histogram\n"
            "mminfer_batch_size_bucket{model=\"clip\",le=\"1\"} 1\n"
            "mminfer_batch_size_bucket{model=\"clip\",le=\"2\"} 1\n"
            "mminfer_batch_size_bucket{model=\"clip\",le=\"4\"} 2\n"
            "mminfer_batch_size_bucket{model=\"clip\",le=\"+Inf\"} 3\n"
            "mminfer_batch_size_sum{model=\"clip\"} 13\n"
            "mminfer_batch_size_count{model=\"clip\"} 3\n"
            "# HELP mminfer_queue_depth Requests waiting\n"
            "# TYPE mminfer_queue_depth gauge\n"
            "mminfer_queue_depth 7.5\n"
            "# HELP mminfer_requests_total Requests received\n"
            "# TYPE mminfer_requests_total counter\n"
            "mminfer_requests_total{code=\"200\",model=\"clip\"} 3\n"
            "mminfer_requests_total{code=\"429\",model=\"clip\"} 1\n");
}

TEST(Metrics, CounterFollowsARunningTotalUpwardOnly) {
  Registry r;
  Counter& c = r.counter("x_total", "A total kept elsewhere");
  c.advance_to(5);
  EXPECT_EQ(c.value(), 5);
  c.advance_to(3);  // a stale reading
  EXPECT_EQ(c.value(), 5);
  c.advance_to(8);
  EXPECT_EQ(c.value(), 8);
  EXPECT_NE(r.render().find("# TYPE x_total counter\nx_total 8\n"), std::string::npos) << r.render();
}

TEST(Metrics, LabelOrderFindsTheSameChild) {
  Registry r;
  Counter& a = r.counter("x_total", "x", {{"a", "1"}, {"b", "2"}});
  Counter& b = r.counter("x_total", "x", {{"b", "2"}, {"a", "1"}});
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &r.counter("x_total", "x", {{"a", "1"}, {"b", "3"}}));
}

TEST(Metrics, EscapesLabelValuesAndHelp) {
  Registry r;
  r.counter("esc_total", "back\\slash and\nnewline \"quotes\" stay", {{"path", "C:\\dir\\\"x\"\nnext"}}).inc();
  EXPECT_EQ(r.render(),
            "# HELP esc_total back\\\\slash and\\nnewline \"quotes\" stay\n"
            "# TYPE esc_total counter\n"
            "esc_total{path=\"C:\\\\dir\\\\\\\"x\\\"\\nnext\"} 1\n");
}

TEST(Metrics, PrintableTextKeepsUtf8AndReplacesTheRest) {
  EXPECT_EQ(printable_text("/v1/caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"), "/v1/caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  const std::string r = "\xEF\xBF\xBD";  // U+FFFD
  EXPECT_EQ(printable_text("/a\xFF\xFE"), "/a" + r + r);
  EXPECT_EQ(printable_text(std::string("t\0ab\x01\x7F\tz\n", 9)), "t" + r + "ab" + r + r + r + "z\n");
  EXPECT_EQ(printable_text("\xC0\xAF"), r + r);              // overlong '/'
  EXPECT_EQ(printable_text("\xED\xA0\x80"), r + r + r);      // a UTF-16 surrogate
  EXPECT_EQ(printable_text("\xF4\x90\x80\x80"), r + r + r + r);  // above U+10FFFF
  EXPECT_EQ(printable_text("\xE2\x82"), r + r);              // cut short
}

TEST(Metrics, ClientBytesInLabelValuesRenderAsValidText) {
  Registry r;
  r.counter("req_total", "help \xFF with a bad byte", {{"endpoint", "/\xFF\xFE"}}).inc();
  // Another raw value that prints alike is the same child, not a duplicate series.
  r.counter("req_total", "help", {{"endpoint", "/\xFE\xFF"}}).inc();
  EXPECT_EQ(r.render(),
            "# HELP req_total help \xEF\xBF\xBD with a bad byte\n"
            "# TYPE req_total counter\n"
            "req_total{endpoint=\"/\xEF\xBF\xBD\xEF\xBF\xBD\"} 2\n");
}

TEST(Metrics, HistogramBucketsAreCumulativeAndInclusive) {
  Histogram h({0.1, 1, 10});
  for (double v : {0.05, 0.1, 0.5, 1.0, 5.0, 50.0, 500.0}) h.observe(v);
  Histogram::Snapshot s = h.snapshot();
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{2, 4, 5, 7}));  // a bound counts values equal to it
  EXPECT_EQ(s.count, 7u);
  EXPECT_DOUBLE_EQ(s.sum, 556.65);
  h.observe(std::nan(""));
  EXPECT_EQ(h.snapshot().cumulative, (std::vector<uint64_t>{2, 4, 5, 8}));
}

TEST(Metrics, DefaultBuckets) {
  std::vector<double> lat = latency_buckets();
  EXPECT_EQ(lat.front(), 0.0005);
  EXPECT_EQ(lat.back(), 10);
  EXPECT_TRUE(std::is_sorted(lat.begin(), lat.end()));
  EXPECT_EQ(batch_size_buckets(), (std::vector<double>{1, 2, 4, 8, 16, 32, 64}));
  Registry r;
  r.histogram("lat_seconds", "latency").observe(0.003);
  std::string text = r.render();
  EXPECT_NE(text.find("lat_seconds_bucket{le=\"0.0005\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lat_seconds_bucket{le=\"0.005\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lat_seconds_bucket{le=\"10\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lat_seconds_sum 0.003\n"), std::string::npos) << text;
}

TEST(Metrics, NumbersReadBackExactly) {
  Registry r;
  r.gauge("g", "g", {{"v", "a"}}).set(1e20);
  r.gauge("g", "g", {{"v", "b"}}).set(-2.5e-7);
  r.gauge("g", "g", {{"v", "c"}}).set(0.1 + 0.2);
  r.gauge("g", "g", {{"v", "d"}}).set(-INFINITY);
  r.gauge("g", "g", {{"v", "e"}}).set(123456789);
  EXPECT_EQ(r.render(),
            "# HELP g g\n# TYPE g gauge\n"
            "g{v=\"a\"} 1e+20\n"
            "g{v=\"b\"} -2.5e-07\n"
            "g{v=\"c\"} 0.30000000000000004\n"
            "g{v=\"d\"} -Inf\n"
            "g{v=\"e\"} 123456789\n");
}

TEST(Metrics, RejectsWhatPrometheusWouldNot) {
  Registry r;
  r.counter("a_total", "a");
  EXPECT_THROW(r.gauge("a_total", "a"), Error);  // another type
  EXPECT_THROW(r.counter("9lives", "bad name"), Error);
  EXPECT_THROW(r.counter("has-dash", "bad name"), Error);
  EXPECT_THROW(r.counter("ok_total", "x", {{"bad-label", "v"}}), Error);
  EXPECT_THROW(r.counter("ok_total", "x", {{"__reserved", "v"}}), Error);
  EXPECT_THROW(r.counter("ok_total", "x", {{"a", "1"}, {"a", "2"}}), Error);
  EXPECT_THROW(r.histogram("h", "x", {{"le", "1"}}), Error);
  EXPECT_THROW(r.histogram("h2", "x", {}, {2, 1}), Error);
  EXPECT_THROW(r.histogram("h3", "x", {}, {1, INFINITY}), Error);
  r.histogram("h4", "x", {}, {1, 2});
  EXPECT_THROW(r.histogram("h4", "x", {{"m", "a"}}, {1, 3}), Error);  // other bounds
  EXPECT_THROW(r.counter("a_total", "a").inc(-1), Error);
  // Failed registrations leave nothing behind.
  EXPECT_EQ(r.render(),
            "# HELP a_total a\n# TYPE a_total counter\na_total 0\n"
            "# HELP h4 x\n# TYPE h4 histogram\nh4_bucket{le=\"1\"} 0\nh4_bucket{le=\"2\"} 0\n"
            "h4_bucket{le=\"+Inf\"} 0\nh4_sum 0\nh4_count 0\n");
}

TEST(Metrics, ConcurrentUpdatesAddUp) {
  Registry r;
  constexpr int kThreads = 8, kEach = 100000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&r, t] {
      // Half the threads look the child up every time, half keep the reference.
      Counter& kept = r.counter("c_total", "c", {{"k", "v"}});
      Histogram& h = r.histogram("h_seconds", "h", {}, {0.5});
      Gauge& g = r.gauge("g", "g");
      for (int i = 0; i < kEach; ++i) {
        if (t % 2) r.counter("c_total", "c", {{"k", "v"}}).inc();
        else kept.inc();
        h.observe(i % 2 ? 1.0 : 0.25);
        g.inc(2);
        g.dec();
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(r.counter("c_total", "c", {{"k", "v"}}).value(), kThreads * kEach);
  EXPECT_EQ(r.gauge("g", "g").value(), kThreads * kEach);
  Histogram::Snapshot s = r.histogram("h_seconds", "h", {}, {0.5}).snapshot();
  EXPECT_EQ(s.count, uint64_t{kThreads} * kEach);
  EXPECT_EQ(s.cumulative[0], uint64_t{kThreads} * kEach / 2);
  EXPECT_DOUBLE_EQ(s.sum, kThreads * kEach * 0.625);
}

}  // namespace
}  // namespace mminfer::serve::metrics
