#include "kernels/cpu/registry.h"

namespace mminfer::kernels {

void register_quantize(Registry&) {}

}  // namespace mminfer::kernels
