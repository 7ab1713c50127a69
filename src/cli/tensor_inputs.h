// Builds input tensors for `run` and `bench` from --input NAME=F.npy and --shape NAME=AxB.
#pragma once
#include <map>
#include <random>
#include <string>
#include <vector>

#include "mminfer/session.h"

namespace mminfer::cli {

Shape parse_shape(const std::string& s, const std::string& what);  // "1x3x224x224"; "" or "scalar" is rank 0

struct IntRange {
  int64_t lo = 0, hi = 1000;  // [lo, hi)
};

// Random tensor: floats normal(0,1), integers uniform in [lo, hi), bools fair coin.
Tensor random_tensor(DType dtype, const Shape& shape, const IntRange& range, std::mt19937_64& rng);

}  // namespace mminfer::cli
