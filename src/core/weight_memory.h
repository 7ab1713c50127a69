// Memory for packed weights, backed by transparent huge pages where the kernel allows them.
//
// A CLIP-B/32 tower streams ~340 MB of packed weights per inference; on 4 KiB pages that is
// ~85k TLB entries to walk every run, and in a VM each first touch is a costly fault. Weights
// live as long as their model, so they are bump-allocated from 2 MiB-aligned chunks marked
// MADV_HUGEPAGE; a chunk is unmapped when the last weight in it is released.
#pragma once
#include <cstddef>
#include <memory>

namespace mminfer {

// `bytes` of 64-byte-aligned memory, held until the last copy of the pointer is gone.
std::shared_ptr<void> allocate_weight_memory(size_t bytes);

// Bytes handed out by allocate_weight_memory and not yet released: the packed weights the
// process holds (what `bench --json` reports as weight_bytes).
size_t weight_memory_in_use();

}  // namespace mminfer
