#include "kernels/cpu/registry.h"

namespace mminfer::kernels {

void register_gather_scatter(Registry&) {}

}  // namespace mminfer::kernels
