// Token ids as the tokenizers and ONNX decoders use them (int64 `input_ids`).
#pragma once
#include <cstdint>

namespace mminfer::generate {

using TokenId = int64_t;
inline constexpr TokenId kNoToken = -1;

}  // namespace mminfer::generate
