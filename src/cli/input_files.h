// Input files named on the command line (images, audio, text), read whole with one-line errors.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mminfer::cli {

// Far above any image or clip a pipeline takes; refusing earlier keeps a wrong path (a disk
// image, /dev/zero) from filling memory.
inline constexpr uint64_t kMaxInputFileBytes = 1ull << 30;

// Throws Error (missing, not a regular file, unreadable, over kMaxInputFileBytes) whose message
// leaves the path out: callers put it in front, as they do for decoding errors.
std::vector<uint8_t> read_input_file(const std::string& path);
std::string read_text_file(const std::string& path);

}  // namespace mminfer::cli
