// Loading a model touches hundreds of MiB of fresh memory (the file's bytes, the weights, their
// packed copies). In 4 KiB pages that is ~300,000 page faults for CLIP-B/32 vision, about 2 s of
// its 5 s load on the virtual machines we measured. glibc backs malloc's large regions with
// transparent huge pages when its tunable glibc.malloc.hugetlb=1 is set, and it reads tunables
// only from the environment at start; so the CLI restarts itself once, first thing, with that
// tunable added. Where the kernel's transparent huge pages are off, or the environment already
// names the tunable (any value), or MMINFER_HUGE_PAGES=0, it does nothing.
#pragma once

namespace mminfer::cli {

// Returns only when it does not restart (including when the restart fails).
void restart_with_huge_pages(char** argv);

}  // namespace mminfer::cli
