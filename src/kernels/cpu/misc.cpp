#include "kernels/cpu/registry.h"

namespace mminfer::kernels {

void register_misc(Registry&) {}

}  // namespace mminfer::kernels
