// If, Loop and Scan: kernels that run subgraphs with their own executors.
#pragma once
#include "kernels/cpu/common/registry.h"

namespace mminfer::runtime {

// Adds the control-flow kernels (listed in kernel_registry.cpp with every other family).
void register_control_flow(kernels::Registry& r);

}  // namespace mminfer::runtime
