// WebP through libwebp. Still images decode straight to RGB; animations through libwebpdemux's
// animation decoder (the one Pillow uses), keeping the first composed frame. Alpha is dropped.
#include <webp/decode.h>
#include <webp/demux.h>

#include <memory>
#include <string>

#include "mminfer/status.h"
#include "modal/image/decoders.h"

namespace mminfer::image {

namespace {

[[noreturn]] void fail(VP8StatusCode status) {
  switch (status) {
    case VP8_STATUS_NOT_ENOUGH_DATA: throw Error("WebP: data ends early (truncated file)");
    case VP8_STATUS_BITSTREAM_ERROR: throw Error("WebP: corrupt bitstream");
    case VP8_STATUS_UNSUPPORTED_FEATURE: throw Error("WebP: uses a feature libwebp does not support");
    case VP8_STATUS_OUT_OF_MEMORY: throw Error("WebP: out of memory");
    default: throw Error("WebP: decoding failed (libwebp status " + std::to_string(static_cast<int>(status)) + ")");
  }
}

Image decode_still(std::span<const uint8_t> bytes, int width, int height) {
  Image im = Image::blank(width, height);
  WebPDecoderConfig config;
  if (!WebPInitDecoderConfig(&config)) throw Error("WebP: libwebp version mismatch");
  config.output.colorspace = MODE_RGB;
  config.output.is_external_memory = 1;
  config.output.u.RGBA.rgba = im.pixels.data();
  config.output.u.RGBA.stride = width * 3;
  config.output.u.RGBA.size = im.pixels.size();
  VP8StatusCode status = WebPDecode(bytes.data(), bytes.size(), &config);
  WebPFreeDecBuffer(&config.output);
  if (status != VP8_STATUS_OK) fail(status);
  return im;
}

struct AnimDecoderDeleter {
  void operator()(WebPAnimDecoder* d) const { WebPAnimDecoderDelete(d); }
};

Image decode_first_frame(std::span<const uint8_t> bytes, const DecodeOptions& options) {
  WebPAnimDecoderOptions opts;
  if (!WebPAnimDecoderOptionsInit(&opts)) throw Error("WebP: libwebpdemux version mismatch");
  opts.color_mode = MODE_RGBA;
  opts.use_threads = 0;
  WebPData data{bytes.data(), bytes.size()};
  std::unique_ptr<WebPAnimDecoder, AnimDecoderDeleter> dec(WebPAnimDecoderNew(&data, &opts));
  if (!dec) throw Error("WebP: cannot parse the animation (corrupt or truncated file)");
  WebPAnimInfo info;
  if (!WebPAnimDecoderGetInfo(dec.get(), &info)) throw Error("WebP: cannot read the animation header");
  check_pixel_limit(Format::kWebp, info.canvas_width, info.canvas_height, options);
  uint8_t* rgba = nullptr;
  int timestamp = 0;
  if (!WebPAnimDecoderGetNext(dec.get(), &rgba, &timestamp)) throw Error("WebP: cannot decode the first frame");
  Image im = Image::blank(static_cast<int>(info.canvas_width), static_cast<int>(info.canvas_height));
  for (size_t i = 0, n = im.pixels.size() / 3; i < n; ++i)
    im.pixels[3 * i] = rgba[4 * i], im.pixels[3 * i + 1] = rgba[4 * i + 1], im.pixels[3 * i + 2] = rgba[4 * i + 2];
  return im;
}

}  // namespace

Image decode_webp(std::span<const uint8_t> bytes, const DecodeOptions& options) {
  WebPBitstreamFeatures features;
  VP8StatusCode status = WebPGetFeatures(bytes.data(), bytes.size(), &features);
  if (status != VP8_STATUS_OK) fail(status);
  check_pixel_limit(Format::kWebp, features.width, features.height, options);
  if (features.has_animation) return decode_first_frame(bytes, options);
  return decode_still(bytes, features.width, features.height);
}

}  // namespace mminfer::image
