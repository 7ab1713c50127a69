// Bytes or a file in, mono samples at the model's rate out: decode.h then resample.h.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "modal/audio/resample.h"

namespace mminfer::audio {

struct LoadOptions {
  int sample_rate = 16000;
  double max_seconds = 30 * 60;                      // refused before decoding when the header says longer
  ResampleQuality quality = ResampleQuality::kBest;  // see resample.h
};

std::vector<float> load_audio(std::span<const uint8_t> bytes, const LoadOptions& options = {});
std::vector<float> load_audio_file(const std::string& path, const LoadOptions& options = {});

}  // namespace mminfer::audio
