// How much work one input may ask of a model, checked from its header before it is queued: a
// 313 KB FLAC that declares 30 minutes at 1 kHz would otherwise cost seconds of decoding,
// resampling and log-mel, and a small PNG may declare gigapixels. Each model sets its own
// bounds in config.json (model_config.h); an input over one is answered 413 naming the limit.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "mminfer/status.h"
#include "pipelines/embedder.h"

namespace mminfer::serve {

struct InputLimits {
  double max_audio_seconds = 10 * 60;      // config.json max_audio_seconds
  int64_t max_image_pixels = 50'000'000;   // config.json max_image_pixels (width x height)
  size_t max_text_bytes = 100'000;         // config.json max_text_bytes (UTF-8 bytes)
};

// An input over a limit: HTTP 413.
class InputTooLarge : public Error {
 public:
  using Error::Error;
};

// Throws InputTooLarge naming the limit and the config key that sets it. Inputs whose header
// does not say (a corrupt file, an Ogg stream of unknown length) pass: the decoder bounds those.
void check_input_cost(pipelines::Modality m, std::string_view bytes, const InputLimits& limits);

}  // namespace mminfer::serve
