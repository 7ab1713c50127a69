// JPEG through libjpeg(-turbo). libjpeg reports errors by calling error_exit, whose default
// prints and exit()s the process; ours longjmps back to a setjmp in run_libjpeg, and the
// caller turns the saved message into an Error. Only C-style locals live in that frame, so
// the jump skips no destructors.
#include <csetjmp>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>

// clang-format off: jpeglib.h needs size_t and FILE declared before it
#include <jpeglib.h>
// clang-format on

#include "mminfer/status.h"
#include "modal/image/decoders.h"
#include "modal/image/exif.h"

namespace mminfer::image {

namespace {

struct JpegErrors {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void fail_with(j_common_ptr c, const char* message) {
  auto* e = reinterpret_cast<JpegErrors*>(c->err);
  std::snprintf(e->message, sizeof e->message, "%s", message);
  std::longjmp(e->jump, 1);
}

[[noreturn]] void on_error(j_common_ptr c) {
  char text[JMSG_LENGTH_MAX];
  (*c->err->format_message)(c, text);
  fail_with(c, text);
}

// Warnings (extraneous bytes, corrupt-data recoveries) are tolerated like Pillow does, silently.
void on_output(j_common_ptr) {}

// The whole file is one buffer, so libjpeg asking for more means the data ended early, except
// when every row is already out and only the EOI marker is missing: then a fake EOI lets it finish.
boolean fill_input(j_decompress_ptr c) {
  static const JOCTET eoi[2] = {0xFF, JPEG_EOI};
  if (c->output_height == 0 || c->output_scanline < c->output_height)
    fail_with(reinterpret_cast<j_common_ptr>(c), "data ends early (truncated file)");
  c->src->next_input_byte = eoi;
  c->src->bytes_in_buffer = 2;
  return TRUE;
}

void skip_input(j_decompress_ptr c, long n) {
  if (n <= 0) return;
  size_t skip = static_cast<size_t>(n);
  while (skip > c->src->bytes_in_buffer) {
    skip -= c->src->bytes_in_buffer;
    c->src->bytes_in_buffer = 0;
    (*c->src->fill_input_buffer)(c);
  }
  c->src->next_input_byte += skip;
  c->src->bytes_in_buffer -= skip;
}

void no_op(j_decompress_ptr) {}

// Pillow's CMYK -> RGB: each channel is (255 - k) scaled by (255 - c), with libjpeg's Adobe
// (inverted) CMYK undone first since Adobe writes nearly all CMYK JPEGs.
uint8_t cmyk_channel(uint8_t inverted_c, uint8_t inverted_k) {
  int nk = inverted_k;  // 255 - k
  int t = (255 - inverted_c) * nk + 128;
  int v = nk - (((t >> 8) + t) >> 8);  // nk - round(c * nk / 255)
  return static_cast<uint8_t>(v < 0 ? 0 : v);
}

struct JpegDecoder {
  jpeg_decompress_struct cinfo{};
  JpegErrors errors{};
  jpeg_source_mgr source{};
  std::span<const uint8_t> bytes;
  const DecodeOptions* options = nullptr;
  Image image;
  std::vector<uint8_t> cmyk_row;
  bool created = false;

  ~JpegDecoder() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }

  void read_pixels() {
    jpeg_read_header(&cinfo, TRUE);
    check_pixel_limit(Format::kJpeg, cinfo.image_width, cinfo.image_height, *options);
    bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
    cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;  // libjpeg-turbo turns gray into RGB itself
    jpeg_start_decompress(&cinfo);
    image = Image::blank(static_cast<int>(cinfo.output_width), static_cast<int>(cinfo.output_height));
    if (cmyk) cmyk_row.resize(static_cast<size_t>(cinfo.output_width) * 4);
    while (cinfo.output_scanline < cinfo.output_height) {
      uint8_t* rgb = image.row(static_cast<int>(cinfo.output_scanline));
      JSAMPROW row = cmyk ? cmyk_row.data() : rgb;
      jpeg_read_scanlines(&cinfo, &row, 1);
      if (!cmyk) continue;
      for (size_t x = 0; x < cinfo.output_width; ++x)
        for (int ch = 0; ch < 3; ++ch) rgb[3 * x + ch] = cmyk_channel(cmyk_row[4 * x + ch], cmyk_row[4 * x + 3]);
    }
    jpeg_finish_decompress(&cinfo);
  }
};

// Returns false after a libjpeg error; decoder.errors.message says which.
bool run_libjpeg(JpegDecoder& d) {
  d.cinfo.err = jpeg_std_error(&d.errors.mgr);
  d.errors.mgr.error_exit = on_error;
  d.errors.mgr.output_message = on_output;
  if (setjmp(d.errors.jump)) return false;
  jpeg_create_decompress(&d.cinfo);
  d.created = true;
  d.source.next_input_byte = d.bytes.data();
  d.source.bytes_in_buffer = d.bytes.size();
  d.source.init_source = no_op;
  d.source.fill_input_buffer = fill_input;
  d.source.skip_input_data = skip_input;
  d.source.resync_to_restart = jpeg_resync_to_restart;
  d.source.term_source = no_op;
  d.cinfo.src = &d.source;
  d.read_pixels();
  return true;
}

}  // namespace

Image decode_jpeg(std::span<const uint8_t> bytes, const DecodeOptions& options) {
  JpegMarkers markers = scan_jpeg_markers(bytes);
  if (markers.width != 0) check_pixel_limit(Format::kJpeg, markers.width, markers.height, options);
  JpegDecoder d;
  d.bytes = bytes;
  d.options = &options;
  if (!run_libjpeg(d)) throw Error(std::string("JPEG: ") + d.errors.message);
  if (!options.apply_exif_orientation) return std::move(d.image);
  return apply_orientation(d.image, exif_orientation(markers.exif));
}

}  // namespace mminfer::image
