// The process's kernel registry: every op family, control flow included.
#pragma once
#include "kernels/cpu/common/registry.h"

namespace mminfer::runtime {

// Built on first use (thread-safe), after MMINFER_ISA is checked, so a bad value is reported
// before any kernel exists. Throws Error then.
const kernels::Registry& kernel_registry();

}  // namespace mminfer::runtime
