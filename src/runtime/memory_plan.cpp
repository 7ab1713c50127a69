#include "runtime/memory_plan.h"

#include <algorithm>
#include <numeric>

namespace mminfer::runtime {

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests, size_t alignment) {
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return requests[a].bytes > requests[b].bytes; });
  struct Placed {
    size_t offset, end;
    int first, last, group;
  };
  std::vector<Placed> placed;
  for (size_t idx : order) {
    const BufferRequest& r = requests[idx];
    size_t size = (r.bytes + alignment - 1) / alignment * alignment;
    if (size == 0) size = alignment;
    // Gather the memory ranges of buffers alive at the same time, sorted by offset.
    std::vector<std::pair<size_t, size_t>> busy;
    for (const Placed& p : placed)
      if (p.group != r.group || !(p.last < r.first_step || r.last_step < p.first)) busy.push_back({p.offset, p.end});
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (auto& [lo, hi] : busy) {
      if (lo >= offset + size) break;
      offset = std::max(offset, hi);
    }
    plan.offsets[idx] = offset;
    placed.push_back({offset, offset + size, r.first_step, r.last_step, r.group});
    plan.total_bytes = std::max(plan.total_bytes, offset + size);
  }
  return plan;
}

}  // namespace mminfer::runtime
