#include "kernels/cpu/registry.h"

namespace mminfer::kernels {

void register_elementwise_binary(Registry&) {}

}  // namespace mminfer::kernels
