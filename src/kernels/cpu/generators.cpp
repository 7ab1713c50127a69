#include "kernels/cpu/registry.h"

namespace mminfer::kernels {

void register_generators(Registry&) {}

}  // namespace mminfer::kernels
