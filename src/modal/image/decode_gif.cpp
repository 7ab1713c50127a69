// GIF through giflib: the first frame only, placed on the logical screen the way Pillow does
// for frame 0 (screen grown to hold the frame, uncovered pixels filled with the frame's
// transparent index or 0), then looked up in the local or global palette. Transparency is
// dropped: the transparent index keeps its palette colour.
#include <gif_lib.h>

#include <algorithm>
#include <memory>
#include <string>

#include "mminfer/status.h"
#include "modal/image/decoders.h"

namespace mminfer::image {

namespace {

struct MemoryReader {
  std::span<const uint8_t> bytes;
  size_t pos = 0;
  bool ran_out = false;  // giflib reports a short read under several codes; this says which it was
};

int read_bytes(GifFileType* gif, GifByteType* out, int n) {
  auto* r = static_cast<MemoryReader*>(gif->UserData);
  size_t take = std::min(static_cast<size_t>(n < 0 ? 0 : n), r->bytes.size() - r->pos);
  std::copy_n(r->bytes.data() + r->pos, take, out);
  r->pos += take;
  r->ran_out |= take < static_cast<size_t>(n < 0 ? 0 : n);
  return static_cast<int>(take);  // short reads make giflib fail with "read failed"
}

struct GifCloser {
  void operator()(GifFileType* gif) const {
    int ignored;
    DGifCloseFile(gif, &ignored);
  }
};

[[noreturn]] void fail(int code, const MemoryReader& reader) {
  if (reader.ran_out) throw Error("GIF: data ends early (truncated file)");
  const char* text = GifErrorString(code);
  throw Error(std::string("GIF: ") + (text ? text : "giflib error " + std::to_string(code)));
}

// Reads records up to the first image descriptor; returns the transparent index its graphic
// control extension names, or -1.
int read_to_first_image(GifFileType* gif, const MemoryReader& reader) {
  int transparent = -1;
  for (;;) {
    GifRecordType type;
    if (DGifGetRecordType(gif, &type) == GIF_ERROR) fail(gif->Error, reader);
    if (type == IMAGE_DESC_RECORD_TYPE) {
      if (DGifGetImageDesc(gif) == GIF_ERROR) fail(gif->Error, reader);
      return transparent;
    }
    if (type == TERMINATE_RECORD_TYPE) throw Error("GIF: the file holds no image");
    if (type != EXTENSION_RECORD_TYPE) continue;
    int code = 0;
    GifByteType* block = nullptr;
    if (DGifGetExtension(gif, &code, &block) == GIF_ERROR) fail(gif->Error, reader);
    // block[0] is the length; a graphic control block is flags, delay (2), transparent index.
    if (code == GRAPHICS_EXT_FUNC_CODE && block && block[0] >= 4) transparent = (block[1] & 1) ? block[4] : -1;
    while (block)
      if (DGifGetExtensionNext(gif, &block) == GIF_ERROR) fail(gif->Error, reader);
  }
}

}  // namespace

Image decode_gif(std::span<const uint8_t> bytes, const DecodeOptions& options) {
  if (bytes.size() >= 10) {  // logical screen size, before giflib allocates anything
    int64_t w = bytes[6] | bytes[7] << 8, h = bytes[8] | bytes[9] << 8;
    if (w > 0 && h > 0) check_pixel_limit(Format::kGif, w, h, options);
  }
  MemoryReader reader{bytes};
  int error = 0;
  std::unique_ptr<GifFileType, GifCloser> gif(DGifOpen(&reader, read_bytes, &error));
  if (!gif) fail(error, reader);
  int transparent = read_to_first_image(gif.get(), reader);

  const GifImageDesc& frame = gif->Image;
  int64_t width = std::max<int64_t>(gif->SWidth, int64_t{frame.Left} + frame.Width);
  int64_t height = std::max<int64_t>(gif->SHeight, int64_t{frame.Top} + frame.Height);
  check_pixel_limit(Format::kGif, width, height, options);
  std::vector<uint8_t> index(static_cast<size_t>(width * height),
                             static_cast<uint8_t>(transparent < 0 ? 0 : transparent));

  // Interlaced frames store rows in four passes: every 8th row from 0, from 4, every 4th from 2, every 2nd from 1.
  std::vector<int> order;
  if (frame.Interlace) {
    for (auto [start, step] : {std::pair{0, 8}, {4, 8}, {2, 4}, {1, 2}})
      for (int y = start; y < frame.Height; y += step) order.push_back(y);
  } else {
    for (int y = 0; y < frame.Height; ++y) order.push_back(y);
  }
  std::vector<GifPixelType> line(static_cast<size_t>(std::max(frame.Width, 1)));
  for (int y : order) {
    if (DGifGetLine(gif.get(), line.data(), frame.Width) == GIF_ERROR) fail(gif->Error, reader);
    std::copy_n(line.data(), frame.Width, &index[static_cast<size_t>((frame.Top + y) * width + frame.Left)]);
  }

  const ColorMapObject* map = frame.ColorMap ? frame.ColorMap : gif->SColorMap;
  Image im = Image::blank(static_cast<int>(width), static_cast<int>(height));
  for (size_t i = 0; i < index.size(); ++i) {
    uint8_t* dst = &im.pixels[3 * i];
    int v = index[i];
    if (!map) {
      dst[0] = dst[1] = dst[2] = static_cast<uint8_t>(v);  // no palette: indices are gray levels
    } else if (v < map->ColorCount) {
      dst[0] = map->Colors[v].Red, dst[1] = map->Colors[v].Green, dst[2] = map->Colors[v].Blue;
    }
  }
  return im;
}

}  // namespace mminfer::image
