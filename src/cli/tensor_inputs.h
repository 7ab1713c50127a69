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

class Args;
// A model's inputs from --input NAME=F.npy, else random (see random_tensor) in the shape of
// --shape NAME=AxB or the model's fixed shape, integers within --int-range NAME=LO:HI.
// Throws Error for unknown names, symbolic shapes without --shape and bad ranges; `needed_by`
// names what wants the concrete shape in that error (e.g. "the accuracy check").
std::vector<NamedTensor> model_inputs(const Args& args, const Session& session, const std::string& needed_by = "");
// The first input whose shape has a symbolic or unknown dimension, described as "'x' [batch, 3]";
// empty when every input's shape is fixed.
std::string first_symbolic_input(const Session& session);

}  // namespace mminfer::cli
