// Deterministic mutations of serialized ONNX models for the loader fuzz smoke test: byte
// flips, truncations, insertions, protobuf field duplication, and structural edits made
// through the protobuf API (duplicate nodes, bad dims, bad dtypes, dangling names, ...).
#pragma once
#include <string>

#include "model_builder.h"

namespace robust {

enum class Mutation {
  kFlipBits,
  kTruncate,
  kInsertBytes,
  kDuplicateBytes,
  kDuplicateTopField,  // a top-level ModelProto field repeated (singular messages then merge)
  kStructural,
  kCount
};
const char* mutation_name(Mutation m);

// Applies one mutation of kind `m` to `bytes` (a serialized ModelProto).
std::string mutate(const std::string& bytes, Mutation m, Rng& rng);

}  // namespace robust
