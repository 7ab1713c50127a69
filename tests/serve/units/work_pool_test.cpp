#include "serve/work_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>

namespace mminfer::serve {
namespace {

TEST(WorkPool, RefusesBeyondCapacityAndDrainsOnStop) {
  WorkPool pool(1, 2);
  std::promise<void> release;
  std::shared_future<void> go = release.get_future().share();
  std::promise<void> started;
  std::atomic<int> ran{0};
  ASSERT_TRUE(pool.post([&, go] { started.set_value(); go.wait(); ++ran; }));
  started.get_future().wait();  // the one worker is busy: what follows waits in the queue
  EXPECT_TRUE(pool.post([&] { ++ran; }));
  EXPECT_TRUE(pool.post([&] { ++ran; }));
  EXPECT_FALSE(pool.post([&] { ++ran; }));  // capacity 2 reached
  release.set_value();
  pool.stop();  // the queued jobs still run
  EXPECT_EQ(ran, 3);
  EXPECT_FALSE(pool.post([&] { ++ran; }));
}

}  // namespace
}  // namespace mminfer::serve
