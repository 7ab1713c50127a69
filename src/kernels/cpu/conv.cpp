#include "kernels/cpu/registry.h"

namespace mminfer::kernels {

void register_conv(Registry&) {}

}  // namespace mminfer::kernels
