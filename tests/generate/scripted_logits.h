// Logits as a function of the prefix, for driving beam search without a model. The integer recipe
// is the one tools/generate_reference.py uses, and every value is exact in float32, so both sides
// see identical logits.
#pragma once
#include <cstdint>
#include <vector>

#include "generate/token.h"

namespace mminfer::generate::testing {

inline uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

inline std::vector<float> scripted_logits(const std::vector<TokenId>& prefix, size_t vocab, const std::vector<TokenId>& eos,
                                          size_t prompt_length, double eos_ramp) {
  uint64_t h = 0x9E3779B97F4A7C15ULL;
  for (TokenId t : prefix) h = mix64(h ^ static_cast<uint64_t>(t + 1));
  std::vector<float> row(vocab);
  for (size_t v = 0; v < vocab; ++v) {
    const uint64_t x = mix64(h ^ ((v + 1) * 0xD1B54A32D192ED03ULL));
    row[v] = static_cast<float>(static_cast<double>((x >> 40) % 4096) / 512.0 - 4.0);
  }
  for (TokenId e : eos) {
    row[static_cast<size_t>(e)] += static_cast<float>(eos_ramp * static_cast<double>(prefix.size() - prompt_length));
  }
  return row;
}

}  // namespace mminfer::generate::testing
