#include "runtime/memory_plan.h"

#include <gtest/gtest.h>

using mminfer::runtime::BufferRequest;
using mminfer::runtime::plan_memory;

TEST(MemoryPlan, ReusesBuffersWhoseLifetimesDoNotOverlap) {
  // a: steps 0-1, b: steps 1-2, c: steps 2-3 -> a and c can share.
  std::vector<BufferRequest> r = {{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}};
  auto plan = plan_memory(r);
  EXPECT_EQ(plan.offsets[0], plan.offsets[2]);
  EXPECT_NE(plan.offsets[0], plan.offsets[1]);
  EXPECT_EQ(plan.total_bytes, 2048u);
}

TEST(MemoryPlan, OverlappingLifetimesNeverShareBytes) {
  std::vector<BufferRequest> r;
  for (int i = 0; i < 50; ++i) r.push_back({static_cast<size_t>(64 * (1 + (i * 37) % 11)), i % 7, i % 7 + 3});
  auto plan = plan_memory(r);
  for (size_t i = 0; i < r.size(); ++i)
    for (size_t j = i + 1; j < r.size(); ++j) {
      bool time_overlap = !(r[i].last_step < r[j].first_step || r[j].last_step < r[i].first_step);
      bool mem_overlap = plan.offsets[i] < plan.offsets[j] + r[j].bytes && plan.offsets[j] < plan.offsets[i] + r[i].bytes;
      EXPECT_FALSE(time_overlap && mem_overlap) << i << " and " << j;
    }
}
