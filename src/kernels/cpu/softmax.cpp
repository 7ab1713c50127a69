#include "kernels/cpu/registry.h"

namespace mminfer::kernels {

void register_softmax(Registry&) {}

}  // namespace mminfer::kernels
