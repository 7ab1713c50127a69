// Static INT8 calibration for `mminfer optimize --calib`: the calibration set, and the range of
// each chosen activation over it.
#pragma once
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/activation_ranges.h"
#include "mminfer/session.h"

namespace mminfer::cli {

class Args;
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

// Loads whatever runs the model with these session options (which observe its activations) and
// feeds it the whole calibration set.
using CalibrationRun = std::function<void(const SessionOptions&)>;
// Told (0, total) as a pass over the calibration set starts, then (done, total) after each sample:
// the command draws the bar.
using CalibrationSteps = std::function<void(size_t done, size_t total)>;
// The model at `path` on the samples, one run each.
CalibrationRun run_samples(const std::string& path, const std::vector<Sample>& samples, CalibrationSteps steps = {});
// The pipeline in `pipeline_dir` (clip, audio-encoder or ocr) on the files in `dir`, sorted, at most
// `limit`: images, texts (.txt, one sample per line) and audio clips, whichever it takes, each
// through its own preprocessing; the model being calibrated is one of the pipeline's.
CalibrationRun run_pipeline(const std::string& pipeline_dir, const std::string& dir, size_t limit,
                            CalibrationSteps steps = {});

// --calib-limit N (64 when absent); throws Error below 1.
size_t calib_limit_flag(const Args& args);
// The calibration run the flags ask for: with --calib-pipeline DIR, that folder's pipeline on the
// files of --calib; otherwise the samples of --calib (images through --calib-preprocess), which
// also land in `samples`, fed to the model at `path` (`session` tells their input names).
CalibrationRun calibration_run_flags(const Args& args, const std::string& path, const Session& session,
                                     CalibrationSteps steps, std::vector<Sample>* samples);

// The range `method` picks for each of `activations` of the model at `path`, observed through
// `run` (twice for percentile and entropy: range, then histogram). Throws Error when an
// activation was never computed (the pipeline does not run that model). `inputs`: the model's
// input names; the first `keep` runs' inputs are copied to `kept` (evaluation inputs as the
// pipeline makes them).
std::map<std::string, std::pair<float, float>> calibrate_ranges(const std::string& path,
                                                                const std::set<std::string>& activations,
                                                                const CalibrationRun& run, CalibrationMethod method,
                                                                double percentile, int threads,
                                                                const std::vector<std::string>& inputs = {},
                                                                size_t keep = 0, std::vector<Sample>* kept = nullptr);

}  // namespace mminfer::cli
