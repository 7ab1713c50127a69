#include "kernels/cpu/registry.h"

namespace mminfer::kernels {

void register_resize(Registry&) {}

}  // namespace mminfer::kernels
