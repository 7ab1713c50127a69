// Storage for large tensors that come and go on every run (a graph output, a batch's inputs).
// Freed blocks are kept, up to a budget, and handed out again for the same size, so a run
// writes to pages already mapped: the C library would return a block this size to the system
// and map fresh pages for the next run, each page costing a fault (~10 us on the virtual
// machines we measured: 3.5 ms for one 1.2 MiB output per run).
#pragma once
#include <cstddef>
#include <memory>

namespace mminfer {

// 64-byte aligned, uninitialised storage of at least `bytes` rounded up to 64; nullptr when out
// of memory.
std::shared_ptr<void> allocate_storage(size_t bytes);

// Bytes held in freed blocks kept for reuse (for tests).
size_t pooled_storage_bytes();

}  // namespace mminfer
