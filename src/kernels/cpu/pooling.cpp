#include "kernels/cpu/registry.h"

namespace mminfer::kernels {

void register_pooling(Registry&) {}

}  // namespace mminfer::kernels
