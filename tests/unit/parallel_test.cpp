#include "core/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

namespace mminfer {
namespace {

TEST(ParallelEach, CallsEveryItemOnceAndRethrowsTheFirstFailureAfterAll) {
  set_num_threads(2);
  std::vector<std::atomic<int>> calls(9);
  parallel_each(9, [&](int64_t i) { ++calls[i]; });
  for (auto& c : calls) EXPECT_EQ(c.load(), 1);

  std::vector<std::atomic<int>> seen(9);
  try {
    parallel_each(9, [&](int64_t i) {
      ++seen[i];
      if (i == 3 || i == 7) throw std::runtime_error("item " + std::to_string(i));
    });
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "item 3");
  }
  for (auto& c : seen) EXPECT_EQ(c.load(), 1);  // the items after a failure still ran
  parallel_each(0, [&](int64_t) { ADD_FAILURE() << "called for no items"; });
  set_num_threads(0);
}

}  // namespace
}  // namespace mminfer

