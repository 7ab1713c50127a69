// If, Loop and Scan: kernels that run subgraphs with their own executors.
#pragma once

namespace mminfer::runtime {

// Adds the control-flow kernels to the registry (idempotent).
void register_control_flow();

}  // namespace mminfer::runtime
