// Structured pruning without training: whole attention heads and MLP hidden channels leave the
// file, so every runtime that loads it does less work.
//
// Importance comes from calibration: a unit's share of its block's output is the energy of its
// rows of the output projection over the activations it met, tr(W_uᵀ C_uu W_u) with C the
// (centred) second moment of the projection's input. The least important units of every block go;
// then the output projection is refitted by least squares on the same statistics
// (min |X_S W' + b' − (X W + b)|²), so what the removed units carried on average and what the
// kept ones can express of the rest stays in the block's output. With fewer than twice as many
// calibration rows as kept channels, only the removed channels' mean moves into the bias.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "onnx/transformer_blocks.h"

namespace mminfer::onnx_io {

// What calibration saw of one projection input: Σ x xᵀ and Σ x over every row.
struct InputMoments {
  int64_t channels = 0;
  std::vector<double> xx;  // [channels, channels]
  std::vector<double> x;   // [channels]
  int64_t rows = 0;
  int64_t samples = 0;     // batch elements that added rows
  double tokens_per_sample() const {
    return samples > 0 ? static_cast<double>(rows) / static_cast<double>(samples) : 0;
  }
};

struct PruneOptions {
  double heads = 0;         // share of each attention block's heads removed
  double mlp = 0;           // share of each MLP's hidden channels removed
  bool reconstruct = true;  // refit the output projections
};

struct PrunedBlock {
  std::string kind;                 // "attention" or "mlp"
  std::string input;                // the output projection's input (calibrated activation)
  std::string output_weight;        // the output projection's weight in the original file
  std::string output_bias;          // and its bias, "" when it has none
  std::string written_weight, written_bias;  // what replaced them ("" when nothing was removed)
  int64_t units = 0, kept = 0;      // heads or hidden channels
  std::vector<int64_t> removed;     // their indices, ascending
  // The block's output error on the calibration rows, relative to the output's energy:
  // the removed units' rows dropped, and after the refit (equal without reconstruction).
  double error_dropped = 0, error = 0;
  // "least squares", "mean into bias" (too few calibration rows for a full refit), or "none".
  std::string refit;
  // Multiply-adds ×2 per sample of the block's MatMuls (projections; for attention also scores
  // and context, as self-attention over the calibration samples' length), before and after.
  double flops_before = 0, flops_after = 0;
  int64_t params_before = 0, params_after = 0;
};

// Prunes every block whose projection input has moments (keyed by AttentionBlock::merged and
// MlpBlock::hidden), rewriting weights, biases and the Reshape shapes in `model`'s main graph.
// Blocks without moments are left whole. base_dir resolves external data.
std::vector<PrunedBlock> prune_blocks(onnx::ModelProto& model, const TransformerBlocks& blocks,
                                      const std::map<std::string, InputMoments>& moments, const PruneOptions& opt,
                                      const std::string& base_dir);

}  // namespace mminfer::onnx_io
