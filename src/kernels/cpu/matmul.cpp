#include "kernels/cpu/registry.h"

namespace mminfer::kernels {

void register_matmul(Registry&) {}

}  // namespace mminfer::kernels
