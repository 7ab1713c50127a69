// Helpers for the image tests: the case manifest written by tools/make_image_cases.py, file
// and .npy loading, and pixel differences.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "mminfer/tensor.h"
#include "modal/image/image.h"

namespace mminfer::image::test {

std::string case_path(const std::string& name);  // inside the generated cases folder

// Manifest lines of one kind ("decode", "resize", ...), split on spaces, kind dropped.
std::vector<std::vector<std::string>> manifest(const std::string& kind);

std::vector<uint8_t> read_bytes(const std::string& path);
Image read_npy_image(const std::string& path);  // uint8 HxWx3 .npy

// Largest |a - b| over all bytes; -1 when the sizes differ.
int max_abs_diff(const Image& a, const Image& b);
// Largest |a - b| of two float32 tensors; infinity when their shapes differ.
float max_abs_diff(const Tensor& a, const Tensor& b);

// One-line result for the log, e.g. "PNG: 21 cases, max |ours - Pillow| = 0".
void report(const std::string& what, int cases, double max_diff);

}  // namespace mminfer::image::test
