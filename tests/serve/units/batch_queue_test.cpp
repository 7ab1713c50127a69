#include "serve/batch_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <future>

namespace mminfer::serve {
namespace {

using Queue = BatchQueue<int, int>;

TEST(BatchController, WithoutATargetPicksTheMaximum) {
  BatchController c(8, 0);
  EXPECT_EQ(c.next_batch_size(1), 8u);
  c.record(8, 1000);
  EXPECT_EQ(c.next_batch_size(1), 8u);
}

TEST(BatchController, PicksTheLargestSizeUnderTheTarget) {
  BatchController c(8, 30);
  c.record(1, 10);
  c.record(8, 52);  // 6 ms per extra item: size 4 -> 28 ms, size 5 -> 34 ms
  EXPECT_NEAR(c.predicted_ms(4), 28, 1e-9);
  EXPECT_EQ(c.next_batch_size(1), 4u);
  EXPECT_EQ(c.chosen(), 4u);
  // A backlog of two batches or more drains fastest with the largest batch.
  EXPECT_EQ(c.next_batch_size(8), 8u);
  // A size measured slower than the target is avoided from then on; the next smaller one,
  // still unmeasured, is predicted from the line (3 -> 22 ms).
  for (int i = 0; i < 20; ++i) c.record(4, 60);
  EXPECT_EQ(c.next_batch_size(1), 3u);
}

TEST(BatchQueue, GathersBatchesUpToTheMaximum) {
  BatchPolicy p;
  p.max_batch_size = 4;
  p.max_queue_delay = std::chrono::milliseconds(200);
  std::vector<size_t> sizes;
  std::mutex mu;
  Queue q(p, [&](std::vector<int>& in) {
    std::lock_guard<std::mutex> lock(mu);
    sizes.push_back(in.size());
    std::vector<Queue::Result> out(in.size());
    for (size_t i = 0; i < in.size(); ++i) out[i].value = in[i] * 2;
    return out;
  });
  std::vector<std::promise<int>> results(10);
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(q.push(i, [&results, i](Queue::Result r) { results[i].set_value(r.value); }));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(results[i].get_future().get(), 2 * i);
  q.stop();
  ASSERT_EQ(sizes.size(), 3u);
  EXPECT_EQ(sizes[0], 4u);
  EXPECT_EQ(sizes[1], 4u);
  EXPECT_EQ(sizes[2], 2u);  // the rest, once max_queue_delay has passed
}

TEST(BatchQueue, PreferredSizesCutTheBatch) {
  BatchPolicy p;
  p.max_batch_size = 8;
  p.preferred_batch_sizes = {2, 4};
  p.max_queue_delay = std::chrono::milliseconds(100);
  std::vector<size_t> sizes;
  std::promise<void> all_queued;
  std::shared_future<void> go = all_queued.get_future().share();
  Queue q(p, [&](std::vector<int>& in) {
    go.wait();
    sizes.push_back(in.size());
    return std::vector<Queue::Result>(in.size());
  });
  std::atomic<int> done{0};
  for (int i = 0; i < 7; ++i) q.push(i, [&](Queue::Result) { ++done; });
  all_queued.set_value();
  q.stop();
  EXPECT_EQ(done, 7);
  ASSERT_FALSE(sizes.empty());
  EXPECT_EQ(sizes[0], 4u);  // 7 waiting: the largest preferred size that fits
}

TEST(BatchQueue, ItemErrorsStayWithTheirItemAndExceptionsFailTheBatch) {
  BatchPolicy p;
  p.max_batch_size = 1;
  Queue q(p, [](std::vector<int>& in) {
    if (in[0] == 3) throw std::runtime_error("the model failed");
    std::vector<Queue::Result> out(1);
    if (in[0] == 2) out[0].error = "bad item 2";
    out[0].value = in[0];
    return out;
  });
  std::promise<Queue::Result> r1, r2, r3;
  q.push(1, [&](Queue::Result r) { r1.set_value(r); });
  q.push(2, [&](Queue::Result r) { r2.set_value(r); });
  q.push(3, [&](Queue::Result r) { r3.set_value(r); });
  EXPECT_EQ(r1.get_future().get().error, "");
  EXPECT_EQ(r2.get_future().get().error, "bad item 2");
  EXPECT_EQ(r3.get_future().get().error, "the model failed");
}

TEST(BatchQueue, AFullQueueRefusesAndStopDrains) {
  BatchPolicy p;
  p.max_batch_size = 1;
  p.capacity = 2;
  std::promise<void> release;
  std::shared_future<void> go = release.get_future().share();
  std::atomic<int> ran{0};
  Queue q(p, [&](std::vector<int>& in) {
    go.wait();
    ++ran;
    return std::vector<Queue::Result>(in.size());
  });
  std::atomic<int> answered{0};
  auto done = [&](Queue::Result) { ++answered; };
  int accepted = 0;
  for (int i = 0; i < 10; ++i) accepted += q.push(i, done);
  // One item may already be with the worker; at most `capacity` wait behind it.
  EXPECT_GE(accepted, 2);
  EXPECT_LE(accepted, 3);
  release.set_value();
  q.stop();
  EXPECT_EQ(answered, accepted);  // everything accepted was answered, nothing else
  EXPECT_FALSE(q.push(99, done));  // stopped
}

TEST(BatchQueue, InFlightCountsWaitingAndRunningUntilAnswered) {
  BatchPolicy p;
  p.max_batch_size = 1;
  p.capacity = 4;
  std::promise<void> release, started;
  std::shared_future<void> go = release.get_future().share();
  std::atomic<bool> first{true};
  Queue q(p, [&](std::vector<int>& in) {
    if (first.exchange(false)) started.set_value();
    go.wait();
    return std::vector<Queue::Result>(in.size());
  });
  std::atomic<int> answered{0};
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(q.push(i, [&](Queue::Result) { ++answered; }));
  started.get_future().wait();  // one runs, two wait
  EXPECT_EQ(q.in_flight(), 3u);
  EXPECT_EQ(q.depth(), 2u);
  release.set_value();
  q.stop();
  EXPECT_EQ(answered, 3);
  EXPECT_EQ(q.in_flight(), 0u);
}

// Two instances: two workers, each with its own run, work at the same time.
TEST(BatchQueue, InstancesRunTheirBatchesAtTheSameTime) {
  BatchPolicy p;
  p.max_batch_size = 1;
  p.capacity = 16;
  std::mutex mu;
  std::condition_variable cv;
  int inside = 0, most = 0;
  std::atomic<int> by_first{0}, by_second{0};
  auto run = [&](std::atomic<int>& count) {
    return [&](std::vector<int>& in) {
      std::unique_lock<std::mutex> lock(mu);
      most = std::max(most, ++inside);
      cv.notify_all();
      // Hold the batch until the other worker is inside too (or a while has passed).
      cv.wait_for(lock, std::chrono::milliseconds(200), [&] { return inside >= 2; });
      --inside;
      count += static_cast<int>(in.size());
      return std::vector<Queue::Result>(in.size());
    };
  };
  std::atomic<int> answered{0};
  {
    Queue q(p, std::vector<Queue::RunBatch>{run(by_first), run(by_second)});
    for (int i = 0; i < 8; ++i) ASSERT_TRUE(q.push(i, [&](Queue::Result r) { answered += r.error.empty(); }));
    q.stop();
    EXPECT_EQ(q.in_flight(), 0u);
  }
  EXPECT_EQ(answered, 8);
  EXPECT_EQ(by_first + by_second, 8);
  EXPECT_EQ(most, 2);
  EXPECT_GT(by_first, 0);
  EXPECT_GT(by_second, 0);
}

}  // namespace
}  // namespace mminfer::serve
