// Activation-aware weight scaling (AWQ-style, no training) before MatMulNBits quantization.
// A MatMul Y = X W quantizes the rows of W that meet large activations no better than the others,
// yet their error is multiplied by those activations. Scaling W's row k by s_k and X's channel k
// by 1/s_k leaves Y unchanged in FP32 and gives the important rows more of the code range. Per
// activation X (shared by its MatMuls, such as q, k and v after one norm), s = mean|x|^alpha with
// alpha on a grid in [0, 1] chosen to minimize |X W - X/s Q(diag(s) W)|^2 on calibration rows;
// 1/s is folded into what produces X when that is a per-channel scale (a LayerNormalization's or
// SimplifiedLayerNormalization's gamma and beta, a Mul or Add by a constant vector, a MatMul's
// output columns), else a Mul by 1/s goes before those MatMuls.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "onnx/nbits_weights_writer.h"

namespace mminfer::onnx_io {

// What calibration saw of one activation (the first input of one or more MatMuls).
struct ActivationStats {
  int64_t channels = 0;
  std::vector<double> abs_sum;  // per channel, over every row seen
  int64_t rows = 0;
  std::vector<float> sample;    // up to max_rows rows kept for the error search, [sample_rows, channels]
  int64_t sample_rows = 0;
  // Adds `n` rows of `channels` values; keeps at most `max_rows` of them (a spread, not the first).
  void add(const float* x, int64_t n, int64_t max_rows = 256);
};

// The activations whose MatMuls write_nbits_weights would quantize (main graph), in graph order.
std::vector<std::string> awq_activations(const onnx::ModelProto& model, const NBitsOptions& opt,
                                         const std::string& keep_float = "");

struct AwqChoice {
  std::string activation;
  int matmuls = 0;
  double alpha = 0;        // 0: plain quantization was best
  double error_plain = 0;  // mean squared output error on the calibration rows, alpha 0
  double error = 0;        // the same at the chosen alpha
  std::string folded_into;  // the node that took 1/s, or "a new Mul"
};

// Scales the FP32 weights and folds 1/s as described above, in place; activations without stats
// are left alone. Then write_nbits_weights quantizes the result.
std::vector<AwqChoice> apply_awq_scaling(onnx::ModelProto& model, const std::map<std::string, ActivationStats>& stats,
                                         const NBitsOptions& opt, const std::string& base_dir,
                                         const std::string& keep_float = "");

}  // namespace mminfer::onnx_io
