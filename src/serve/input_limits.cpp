#include "serve/input_limits.h"

#include <cstdio>
#include <span>
#include <string>

#include "modal/audio/decode.h"
#include "modal/image/image.h"

namespace mminfer::serve {

namespace {

std::span<const uint8_t> as_bytes(std::string_view s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

std::string seconds(double s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

}  // namespace

void check_input_cost(pipelines::Modality m, std::string_view bytes, const InputLimits& limits) {
  switch (m) {
    case pipelines::Modality::kText:
      if (bytes.size() > limits.max_text_bytes)
        throw InputTooLarge("text of " + std::to_string(bytes.size()) + " bytes is over the limit of " +
                            std::to_string(limits.max_text_bytes) + " bytes (max_text_bytes)");
      return;
    case pipelines::Modality::kImage: {
      auto d = image::read_dimensions(as_bytes(bytes));
      // Divided, not multiplied: header fields may be up to 32 bits wide.
      if (d && d->width > 0 && d->height > 0 && d->width > limits.max_image_pixels / d->height)
        throw InputTooLarge(std::string(image::format_name(image::detect_format(as_bytes(bytes)))) + " image is " +
                            std::to_string(d->width) + "x" + std::to_string(d->height) + " = " +
                            std::to_string(static_cast<uint64_t>(d->width) * static_cast<uint64_t>(d->height)) +
                            " pixels, over the limit of " + std::to_string(limits.max_image_pixels) +
                            " pixels (max_image_pixels)");
      return;
    }
    case pipelines::Modality::kAudio: {
      auto h = audio::read_audio_header(as_bytes(bytes));
      if (h && h->seconds() > limits.max_audio_seconds)
        throw InputTooLarge("audio is " + seconds(h->seconds()) + " long (" + std::to_string(h->frames) + " samples at " +
                            std::to_string(h->sample_rate) + " Hz), over the limit of " +
                            seconds(limits.max_audio_seconds) + " (max_audio_seconds)");
      return;
    }
  }
}

}  // namespace mminfer::serve
