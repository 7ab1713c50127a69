// Static memory plan: every intermediate tensor gets an offset in one arena, with buffers
// reused once their last reader has run.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mminfer::runtime {

struct BufferRequest {
  size_t bytes = 0;
  int first_step = 0;  // written here
  int last_step = 0;   // last read here (inclusive)
  int group = 0;       // buffers of different groups never share bytes (branches run at once)
};

struct MemoryPlan {
  std::vector<size_t> offsets;  // one per request
  size_t total_bytes = 0;
};

// Places requests so that no two buffers alive at the same step overlap. Largest first,
// lowest fitting offset (a greedy that stays within a few percent of optimal on DNNs).
MemoryPlan plan_memory(const std::vector<BufferRequest>& requests, size_t alignment = 64);

}  // namespace mminfer::runtime
