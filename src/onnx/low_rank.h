// Low-rank projections without training: a MatMul by a constant W [K, N] becomes two, x·A·B with
// A [K, r] and B [r, N], where that is fewer multiply-adds (r (K + N) < K N) and the output
// stays within a bound.
//
// Activation-aware: the error that matters is |X W − X A B|² over the inputs the layer meets, not
// |W − A B|². With the inputs' second moment G = L Lᵀ, that error is |Lᵀ W − Lᵀ A B|², so the
// best rank r comes from the singular values of Lᵀ W: A = L⁻ᵀ U_r S_r, B = V_rᵀ, and the
// relative error is the energy of the dropped singular values.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "onnx/structured_pruning.h"
#include "onnx/transformer_blocks.h"

namespace mminfer::onnx_io {

struct LowRankOptions {
  double max_error = 0.01;  // relative output error allowed per MatMul
  double max_cost = 0.8;    // factor only when r (K + N) <= max_cost · K N: two GEMMs cost more per FLOP
};

struct LowRankChoice {
  std::string weight;   // the MatMul's weight
  std::string input;    // its input activation
  int64_t rows = 0, cols = 0;
  int64_t rank = 0;     // the smallest within max_error (K or N when none is lower)
  double error = 0;     // relative output error at that rank on the calibration rows
  bool factored = false;
  double flops_before = 0, flops_after = 0;  // per sample: multiply-adds ×2 at the calibration length
};

// The projections of `blocks` (those of its attention and MLP blocks, and every other MatMul by
// a constant weight: cross-attention's keys and values included) whose input has moments of the
// weight's width: each is factored where it pays (see above). Returns one choice per projection considered, in graph order.
std::vector<LowRankChoice> factor_low_rank(onnx::ModelProto& model, const TransformerBlocks& blocks,
                                           const std::map<std::string, InputMoments>& moments,
                                           const LowRankOptions& opt, const std::string& base_dir);

// The input activation of each projection of `blocks` (q, k, v and the MLP's first: the ones
// whose inputs pruning leaves whole; output projections are included too).
std::vector<std::string> projection_inputs(const onnx::GraphProto& g, const TransformerBlocks& blocks);

}  // namespace mminfer::onnx_io
