// NumPy .npy files (version 1.0-3.0, little-endian, C order) to and from tensors.
#pragma once
#include <string>

#include "mminfer/tensor.h"

namespace mminfer {

Tensor read_npy(const std::string& path);                 // throws Error naming the file and problem
Tensor parse_npy(const std::string& bytes, const std::string& what);
void write_npy(const std::string& path, const Tensor& t);
std::string encode_npy(const Tensor& t);

}  // namespace mminfer
