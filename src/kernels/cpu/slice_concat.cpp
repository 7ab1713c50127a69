#include "kernels/cpu/registry.h"

namespace mminfer::kernels {

void register_slice_concat(Registry&) {}

}  // namespace mminfer::kernels
