#include "kernels/cpu/registry.h"

namespace mminfer::kernels {

void register_reductions(Registry&) {}

}  // namespace mminfer::kernels
