#include "kernels/cpu/registry.h"

namespace mminfer::kernels {

void register_shape_ops(Registry&) {}

}  // namespace mminfer::kernels
