// Calibration for `mminfer optimize --quantize int4|int8w --calib-prompts FILE`: a text-generation
// folder generates a few tokens for each prompt while the decoder's MatMul inputs are observed.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "onnx/awq_scaling.h"

namespace mminfer::cli {

// The prompts of `file`, one a line (empty lines skipped), at most `limit`. Throws Error when
// the file cannot be read or holds none.
std::vector<std::string> read_prompts(const std::string& file, size_t limit);

// Runs the generative folder `folder` (one of whose decoders must be the file at `model`) greedily
// and returns what it saw of each of `activations`: a text-generation folder generates
// `new_tokens` tokens after each of `inputs` (prompts); an image-to-text folder captions each of
// `inputs` (image files). Throws Error naming an activation the runs never computed.
std::map<std::string, onnx_io::ActivationStats> observe_activations(const std::string& model, const std::string& folder,
                                                                    const std::vector<std::string>& inputs,
                                                                    const std::vector<std::string>& activations,
                                                                    int threads, size_t new_tokens = 8);

// The image files in `dir`, sorted, at most `limit`. Throws Error when there are none.
std::vector<std::string> image_files(const std::string& dir, size_t limit);

}  // namespace mminfer::cli
