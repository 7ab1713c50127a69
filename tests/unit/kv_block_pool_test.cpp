// The pool of KV cache blocks: holders, publishing and finding prefixes, and which cached block
// goes first when a block is needed.
#include "runtime/kv_block_pool.h"

#include <gtest/gtest.h>

#include <vector>

namespace mminfer::runtime {
namespace {

KvBlockPool pool_of(int64_t blocks) { return KvBlockPool(KvCache({{1, 4, 4}}, blocks, 2)); }

TEST(KvBlockPool, BlocksAreTakenUntilEveryOneIsHeld) {
  KvBlockPool pool = pool_of(3);
  EXPECT_EQ(pool.block_size(), 2);
  std::vector<int32_t> taken = {pool.take(), pool.take(), pool.take()};
  EXPECT_EQ(pool.held(), 3);
  EXPECT_EQ(pool.take(), -1);
  pool.give_back(taken[1]);
  EXPECT_EQ(pool.available(), 1);
  EXPECT_EQ(pool.take(), taken[1]);
  EXPECT_THROW(pool.hold(pool.blocks()), std::exception);
}

TEST(KvBlockPool, PublishedBlocksAreFoundByTheirWholePrefix) {
  KvBlockPool pool = pool_of(4);
  const std::vector<int64_t> a = {1, 2}, b = {3, 4};
  const int32_t first = pool.take(), second = pool.take();
  pool.publish(first, 0, a);
  pool.publish(second, KvBlockPool::chain(0, a), b);
  pool.give_back(first), pool.give_back(second);
  EXPECT_EQ(pool.cached(), 2);
  EXPECT_EQ(pool.held(), 0);
  EXPECT_EQ(pool.find(0, b), -1);  // the same positions after another start
  EXPECT_EQ(pool.find(0, a), first);
  EXPECT_EQ(pool.find(KvBlockPool::chain(0, a), b), second);
  EXPECT_EQ(pool.held(), 2);
  EXPECT_EQ(pool.cached(), 0);
  EXPECT_EQ(pool.find(0, a), first);  // two holders now
  pool.give_back(first);
  EXPECT_EQ(pool.held(), 2);
  pool.give_back(first), pool.give_back(second);
  EXPECT_EQ(pool.cached(), 2);
  EXPECT_THROW(pool.give_back(first), std::exception);
}

TEST(KvBlockPool, TheLeastRecentlyUsedCachedBlockIsReusedFirstAndForgotten) {
  KvBlockPool pool = pool_of(2);
  const std::vector<int64_t> a = {1, 2}, b = {5, 6};
  const int32_t x = pool.take(), y = pool.take();
  pool.publish(x, 0, a), pool.publish(y, 0, b);
  pool.give_back(x), pool.give_back(y);
  pool.give_back(pool.find(0, a));  // a used after b
  const int32_t fresh = pool.take();
  EXPECT_EQ(fresh, y);
  EXPECT_EQ(pool.find(0, b), -1);  // its prefix went with it
  EXPECT_EQ(pool.find(0, a), x);
  EXPECT_EQ(pool.take(), -1);
}

TEST(KvBlockPool, AnUnpublishedBlockIsFreeOnceGivenBack) {
  KvBlockPool pool = pool_of(1);
  const int32_t x = pool.take();
  pool.give_back(x);
  EXPECT_EQ(pool.cached(), 0);
  EXPECT_THROW(pool.hold(x), std::exception);  // free blocks are taken, not held
  EXPECT_EQ(pool.take(), x);
}

}  // namespace
}  // namespace mminfer::runtime
