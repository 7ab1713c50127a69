#include "kernels/cpu/registry.h"

namespace mminfer::kernels {

void register_normalization(Registry&) {}

}  // namespace mminfer::kernels
