#include "kernels/cpu/registry.h"

namespace mminfer::kernels {

void register_cast(Registry&) {}

}  // namespace mminfer::kernels
