// An epilogue Activation (see epilogue.h) applied in place with AVX2, for kernels that finish
// their own output tiles instead of leaving it to oneDNN's post-ops. Activation::apply is the
// scalar twin the tests compare against.
#pragma once
#include <cstdint>

#include "kernels/cpu/epilogue.h"

namespace mminfer::kernels {

void apply_activation_avx2(const Activation& act, float* y, int64_t n);

}  // namespace mminfer::kernels
