// A random generator with a published definition, so that one seed gives the same tokens on every
// machine, compiler and build: PCG32 (PCG-XSH-RR, 64-bit state, 32-bit output; M. O'Neill,
// pcg-random.org). std::mt19937 itself is portable but the std distributions over it are not.
#pragma once
#include <cstdint>

namespace mminfer::generate {

class Pcg32 {
 public:
  // `stream` selects one of 2^63 independent sequences (one per request or per batch row).
  explicit Pcg32(uint64_t seed = 0x853c49e6748fea9bULL, uint64_t stream = 0xda3e39cb94b95bdbULL) {
    state_ = 0;
    increment_ = (stream << 1u) | 1u;
    next_u32();
    state_ += seed;
    next_u32();
  }

  uint32_t next_u32() {
    const uint64_t old = state_;
    state_ = old * 6364136223846793005ULL + increment_;
    const uint32_t xorshifted = static_cast<uint32_t>(((old >> 18u) ^ old) >> 27u);
    const uint32_t rot = static_cast<uint32_t>(old >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((-rot) & 31u));
  }

  // Uniform in [0, 1) with 53 random bits, built from two outputs (high 27 bits, then 26).
  double next_double() {
    const uint64_t high = next_u32() >> 5;
    const uint64_t low = next_u32() >> 6;
    return static_cast<double>((high << 26) | low) * (1.0 / 9007199254740992.0);
  }

 private:
  uint64_t state_;
  uint64_t increment_;
};

}  // namespace mminfer::generate
