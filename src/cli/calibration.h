// Static INT8 calibration for `mminfer optimize --calib`: the calibration set, and the range of
// each chosen activation over it.
#pragma once
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/activation_ranges.h"
#include "mminfer/session.h"

namespace mminfer::cli {

using Sample = std::vector<NamedTensor>;

// The samples in `dir`, sorted by name, at most `limit`:
//  - NAME.npy files: each one sample of a single-input model;
//  - sub-folders holding INPUT.npy for every input: one sample of a multi-input model;
//  - images (PNG, JPEG, BMP, GIF, WebP) through `preprocess`: "clip" (CLIP's resize, crop and
//    normalization at the input's size) or "ocr-det" (the PP-OCR detector's resize and
//    normalization, longest side at most 960).
// Throws Error naming the file for anything unreadable, and when nothing usable is found.
std::vector<Sample> calibration_samples(const std::string& dir, const Session& session, const std::string& preprocess,
                                        size_t limit);

// Runs `model` (its file's folder `base_dir` resolves external data) on the samples and returns
// the range `method` picks for each of `activations`.
std::map<std::string, std::pair<float, float>> calibrate_ranges(const onnx::ModelProto& model, const std::string& base_dir,
                                                                const std::set<std::string>& activations,
                                                                const std::vector<Sample>& samples,
                                                                CalibrationMethod method, double percentile, int threads);

}  // namespace mminfer::cli
