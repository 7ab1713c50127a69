// ONNX Reshape's shape rules, shared by Reshape and the kernels that absorb one.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/cpu/common/kernel.h"

namespace mminfer::kernels {

// The shape `in` takes under Reshape target `target`: 0 copies the input dim (unless
// `allowzero`), one -1 is inferred. Fails with a clear message when the counts disagree.
Shape reshape_target(const Shape& in, const std::vector<int64_t>& target, bool allowzero);

}  // namespace mminfer::kernels
