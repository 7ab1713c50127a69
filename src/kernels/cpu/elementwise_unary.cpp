#include "kernels/cpu/registry.h"

namespace mminfer::kernels {

void register_elementwise_unary(Registry&) {}

}  // namespace mminfer::kernels
