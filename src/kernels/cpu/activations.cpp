#include "kernels/cpu/registry.h"

namespace mminfer::kernels {

void register_activations(Registry&) {}

}  // namespace mminfer::kernels
