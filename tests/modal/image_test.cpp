// Image preprocessing against Pillow: decodes of every format, EXIF orientations, resizes,
// Idefics3 tiles, the CLIP crop and normalisation, and one-line errors for bad input. The cases and Pillow's
// answers come from tools/make_image_cases.py (the image_cases_generate test runs it).
#include "modal/image/image.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "core/npy.h"
#include "image_test_util.h"
#include "mminfer/status.h"
#include "modal/image/clip.h"
#include "modal/image/crop.h"
#include "modal/image/exif.h"
#include "modal/image/normalize.h"
#include "modal/image/resize.h"
#include "modal/image/tile_split.h"

namespace mminfer::image {
namespace {

using test::case_path;
using test::manifest;
using test::max_abs_diff;
using test::read_bytes;
using test::read_npy_image;

Format format_of_name(const std::string& name) {
  std::string ext = name.substr(name.rfind('.') + 1);
  static const std::map<std::string, Format> by_ext = {{"jpg", Format::kJpeg},
                                                       {"png", Format::kPng},
                                                       {"bmp", Format::kBmp},
                                                       {"gif", Format::kGif},
                                                       {"webp", Format::kWebp}};
  auto it = by_ext.find(ext);
  return it == by_ext.end() ? Format::kUnknown : it->second;
}

// Decodes every manifest file of one format and compares with Pillow's decode.
void check_decodes(Format format) {
  int cases = 0, worst = 0;
  for (const auto& f : manifest("decode")) {
    if (format_of_name(f[0]) != format) continue;
    SCOPED_TRACE(f[0]);
    std::vector<uint8_t> bytes = read_bytes(case_path(f[0]));
    EXPECT_EQ(detect_format(bytes), format);
    Image ours = decode_image(bytes);
    Image pillow = read_npy_image(case_path(f[1]));
    int diff = max_abs_diff(ours, pillow);
    ASSERT_GE(diff, 0) << "size " << ours.width << "x" << ours.height << ", Pillow " << pillow.width << "x"
                       << pillow.height;
    EXPECT_LE(diff, std::stoi(f[2]));
    worst = std::max(worst, diff);
    ++cases;
  }
  EXPECT_GT(cases, 0);
  test::report(format_name(format), cases, worst);
}

TEST(ImageDecode, PngEqualsPillow) { check_decodes(Format::kPng); }
TEST(ImageDecode, BmpEqualsPillow) { check_decodes(Format::kBmp); }
TEST(ImageDecode, GifEqualsPillow) { check_decodes(Format::kGif); }
TEST(ImageDecode, WebpEqualsPillow) { check_decodes(Format::kWebp); }
TEST(ImageDecode, JpegWithinTwoLevelsOfPillow) { check_decodes(Format::kJpeg); }

TEST(ImageDecode, FormatComesFromMagicBytes) {
  std::vector<uint8_t> png = read_bytes(case_path("gradient_37x23_rgb.png"));
  EXPECT_EQ(detect_format(png), Format::kPng);
  png[1] = 'Q';  // no longer a PNG signature, whatever the name says
  EXPECT_EQ(detect_format(png), Format::kUnknown);
  EXPECT_THROW(decode_image(png), Error);
}

TEST(ImageExif, OrientationsMatchPillow) {
  int cases = 0, worst = 0;
  for (const auto& f : manifest("exif")) {
    SCOPED_TRACE(f[0]);
    std::vector<uint8_t> bytes = read_bytes(case_path(f[0]));
    EXPECT_EQ(exif_orientation(scan_jpeg_markers(bytes).exif), std::stoi(f[1]));
    Image ours = decode_image(bytes);
    int diff = max_abs_diff(ours, read_npy_image(case_path(f[2])));
    ASSERT_GE(diff, 0) << "orientation " << f[1] << " gave " << ours.width << "x" << ours.height;
    EXPECT_LE(diff, 2);
    worst = std::max(worst, diff);
    ++cases;
  }
  EXPECT_EQ(cases, 10);
  test::report("EXIF-oriented JPEG", cases, worst);
}

TEST(ImageExif, CanBeSwitchedOff) {
  std::vector<uint8_t> bytes = read_bytes(case_path("exif_6.jpg"));
  Image stored = decode_image(bytes, {.apply_exif_orientation = false});
  Image upright = decode_image(bytes);
  EXPECT_EQ(stored.width, upright.height);
  EXPECT_EQ(stored.height, upright.width);
}

// Builds "II" TIFF data whose IFD0 holds one entry.
std::vector<uint8_t> tiff_with_entry(uint16_t tag, uint16_t type, uint32_t value) {
  std::vector<uint8_t> t = {'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0};
  auto put16 = [&](uint32_t v) { t.push_back(v & 0xFF), t.push_back(v >> 8 & 0xFF); };
  put16(tag), put16(type), put16(1), put16(0), put16(value & 0xFFFF), put16(value >> 16);
  put16(0), put16(0);
  return t;
}

TEST(ImageExif, ParserIgnoresMalformedBlocks) {
  EXPECT_EQ(exif_orientation(tiff_with_entry(0x0112, 3, 6)), 6);
  EXPECT_EQ(exif_orientation(tiff_with_entry(0x0112, 4, 8)), 8);  // LONG instead of SHORT
  EXPECT_EQ(exif_orientation(tiff_with_entry(0x0112, 3, 0)), 1);  // out of range
  EXPECT_EQ(exif_orientation(tiff_with_entry(0x0112, 3, 9)), 1);
  EXPECT_EQ(exif_orientation(tiff_with_entry(0x0112, 2, 6)), 1);  // ASCII: not a number
  EXPECT_EQ(exif_orientation(tiff_with_entry(0x0110, 3, 6)), 1);  // another tag
  std::vector<uint8_t> t = tiff_with_entry(0x0112, 3, 6);
  EXPECT_EQ(exif_orientation(std::span(t).first(12)), 1);  // entry cut off
  EXPECT_EQ(exif_orientation({}), 1);
  t[0] = t[1] = 'X';  // no byte order mark
  EXPECT_EQ(exif_orientation(t), 1);
  t = tiff_with_entry(0x0112, 3, 6);
  t[4] = 0xFF, t[5] = 0xFF, t[6] = 0xFF, t[7] = 0xFF;  // IFD offset far past the end
  EXPECT_EQ(exif_orientation(t), 1);
  t = tiff_with_entry(0x0112, 3, 6);
  t[8] = 0xFF, t[9] = 0xFF;  // 65535 entries claimed, one present: reading stops at the end
  EXPECT_EQ(exif_orientation(t), 6);
  t[2] = 43;  // not TIFF
  EXPECT_EQ(exif_orientation(t), 1);
}

TEST(ImageExif, MarkerScanStopsAtBrokenSegments) {
  // SOI, APP1 claiming 0x4000 bytes of which 4 exist.
  std::vector<uint8_t> jpeg = {0xFF, 0xD8, 0xFF, 0xE1, 0x40, 0x00, 'E', 'x', 'i', 'f'};
  JpegMarkers m = scan_jpeg_markers(jpeg);
  EXPECT_TRUE(m.exif.empty());
  EXPECT_EQ(m.width, 0);
  // Length field below 2, then bytes that are not a marker.
  jpeg = {0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x01, 0x00};
  EXPECT_TRUE(scan_jpeg_markers(jpeg).exif.empty());
  jpeg = {0xFF, 0xD8, 0x12, 0x34};
  EXPECT_EQ(scan_jpeg_markers(jpeg).width, 0);
}

TEST(ImageExif, ApplyOrientationMovesCorners) {
  // 3x2 image whose pixel (x, y) holds (x, y, 7).
  Image in = Image::blank(3, 2);
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 3; ++x) in.row(y)[3 * x] = x, in.row(y)[3 * x + 1] = y, in.row(y)[3 * x + 2] = 7;
  auto source_of = [](const Image& im, int x, int y) {
    return std::pair<int, int>(im.row(y)[3 * x], im.row(y)[3 * x + 1]);
  };
  // The input pixel that lands top-left, for each orientation.
  const std::pair<int, int> top_left[9] = {{}, {0, 0}, {2, 0}, {2, 1}, {0, 1}, {0, 0}, {0, 1}, {2, 1}, {2, 0}};
  for (int o = 1; o <= 8; ++o) {
    SCOPED_TRACE(o);
    Image out = apply_orientation(in, o);
    EXPECT_EQ(out.width, o >= 5 ? 2 : 3);
    EXPECT_EQ(out.height, o >= 5 ? 3 : 2);
    EXPECT_EQ(source_of(out, 0, 0), top_left[o]);
    EXPECT_EQ(out.row(0)[2], 7);
  }
  // Rotating 90 degrees clockwise (6): the bottom-left input pixel goes top-left, top-left goes top-right.
  EXPECT_EQ(source_of(apply_orientation(in, 6), 1, 0), std::make_pair(0, 0));
}

void check_resizes(const std::string& filter_name, ResizeFilter filter) {
  int cases = 0, worst = 0;
  for (const auto& f : manifest("resize")) {
    if (f[1] != filter_name) continue;
    SCOPED_TRACE(f[4]);
    Image ours = resize(read_npy_image(case_path(f[0])), std::stoi(f[2]), std::stoi(f[3]), filter);
    int diff = max_abs_diff(ours, read_npy_image(case_path(f[4])));
    ASSERT_GE(diff, 0);
    EXPECT_LE(diff, 1);
    worst = std::max(worst, diff);
    ++cases;
  }
  EXPECT_GT(cases, 40);
  test::report("resize " + filter_name, cases, worst);
}

TEST(ImageResize, BilinearWithinOneLevelOfPillow) { check_resizes("bilinear", ResizeFilter::kBilinear); }
TEST(ImageResize, BicubicWithinOneLevelOfPillow) { check_resizes("bicubic", ResizeFilter::kBicubic); }
TEST(ImageResize, LanczosWithinOneLevelOfPillow) { check_resizes("lanczos", ResizeFilter::kLanczos); }

// Idefics3's splitting against idefics3_processor.py on Pillow: rows, columns and every frame's bytes.
TEST(ImageTileSplit, FramesEqualPillowsSplit) {
  int cases = 0, frames = 0, worst = 0;
  for (const auto& f : manifest("split")) {
    SCOPED_TRACE(f[0] + " longest " + f[1] + " tile " + f[2]);
    TiledImage t = split_into_tiles(read_npy_image(case_path(f[0])), std::stoi(f[1]), std::stoi(f[2]), ResizeFilter::kLanczos);
    EXPECT_EQ(t.rows, std::stoi(f[3]));
    EXPECT_EQ(t.cols, std::stoi(f[4]));
    ASSERT_EQ(t.frames.size(), f.size() - 5);
    for (size_t i = 0; i < t.frames.size(); ++i) {
      int diff = max_abs_diff(t.frames[i], read_npy_image(case_path(f[5 + i])));
      ASSERT_GE(diff, 0) << "frame " << i << " is " << t.frames[i].width << "x" << t.frames[i].height;
      EXPECT_EQ(diff, 0) << "frame " << i;
      worst = std::max(worst, diff);
      ++frames;
    }
    ++cases;
  }
  EXPECT_GE(cases, 18);
  test::report("idefics3 split (" + std::to_string(frames) + " frames)", cases, worst);
}

TEST(ImageResize, RejectsEmptySizes) {
  Image im = Image::blank(4, 4);
  EXPECT_THROW(resize(im, 0, 3, ResizeFilter::kBicubic), Error);
  EXPECT_THROW(resize(Image{}, 3, 3, ResizeFilter::kBilinear), Error);
  EXPECT_EQ(resize(im, 4, 4, ResizeFilter::kBicubic).pixels, im.pixels);
}

TEST(ImageClip, ResizeCropAndNormaliseMatchPillow) {
  int cases = 0, worst = 0;
  float worst_f = 0;
  for (const auto& f : manifest("clip")) {
    SCOPED_TRACE(f[2]);
    Image src = read_npy_image(case_path(f[0]));
    int size = std::stoi(f[1]);
    int diff = max_abs_diff(clip_resize_crop(src, size), read_npy_image(case_path(f[2])));
    ASSERT_GE(diff, 0);
    EXPECT_LE(diff, 1);
    Tensor ours = clip_preprocess(src, {.size = size});
    float diff_f = max_abs_diff(ours, read_npy(case_path(f[3])));
    // One grey level is 1 / 255 / std, at most 0.0146; exact pixels leave float rounding only.
    EXPECT_LE(diff_f, diff == 0 ? 1e-5f : 0.015f);
    worst = std::max(worst, diff);
    worst_f = std::max(worst_f, diff_f);
    ++cases;
  }
  EXPECT_GT(cases, 10);
  test::report("CLIP resize+crop (uint8)", cases, worst);
  test::report("CLIP normalised (float32)", cases, worst_f);
}

TEST(ImageClip, BatchStacksImagesAsNchw) {
  std::vector<Image> images = {read_npy_image(case_path("src_noise_101x77.npy")),
                               read_npy_image(case_path("src_checker_33x64.npy")),
                               read_npy_image(case_path("src_text_160x97.npy"))};
  Tensor batch = clip_preprocess_batch(images, {.size = 24});
  ASSERT_EQ(batch.shape(), (Shape{3, 3, 24, 24}));
  for (size_t i = 0; i < images.size(); ++i) {
    Tensor one = clip_preprocess(images[i], {.size = 24});
    EXPECT_TRUE(std::equal(one.data<float>(), one.data<float>() + one.numel(), batch.data<float>() + i * one.numel()));
  }
  std::vector<Tensor> mixed = {Tensor::empty(DType::kFloat32, {3, 4, 4}), Tensor::empty(DType::kFloat32, {3, 4, 5})};
  EXPECT_THROW(stack_batch(mixed), Error);
  EXPECT_THROW(stack_batch({}), Error);
}

TEST(ImageNormalize, PlanarLayoutAndValues) {
  Image im = Image::blank(2, 1);
  im.pixels = {0, 51, 255, 102, 153, 204};  // pixel 0 = (0, 51, 255), pixel 1 = (102, 153, 204)
  Tensor t = to_chw(im, {{0.5f, 0.0f, 1.0f}, {0.5f, 0.2f, 2.0f}});
  ASSERT_EQ(t.shape(), (Shape{3, 1, 2}));
  const float* v = t.data<float>();
  EXPECT_FLOAT_EQ(v[0], -1.0f);                 // R of pixel 0: (0 - 0.5) / 0.5
  EXPECT_FLOAT_EQ(v[1], (0.4f - 0.5f) / 0.5f);  // R of pixel 1
  EXPECT_FLOAT_EQ(v[2], 1.0f);                  // G of pixel 0: 0.2 / 0.2
  EXPECT_FLOAT_EQ(v[3], 3.0f);                  // G of pixel 1: 0.6 / 0.2
  EXPECT_FLOAT_EQ(v[4], 0.0f);                  // B of pixel 0: (1 - 1) / 2
  EXPECT_FLOAT_EQ(v[5], -0.1f);                 // B of pixel 1: (0.8 - 1) / 2
  EXPECT_THROW(to_chw(im, {{0, 0, 0}, {1, 0, 1}}), Error);
}

TEST(ImageCrop, CentreOffsetsRoundDown) {
  Image im = Image::blank(6, 5);
  for (int y = 0; y < 5; ++y)
    for (int x = 0; x < 6; ++x) im.row(y)[3 * x] = x, im.row(y)[3 * x + 1] = y;
  Image c = center_crop(im, 3, 2);  // offsets floor(3 / 2) = 1 and floor(3 / 2) = 1
  EXPECT_EQ(c.row(0)[0], 1);
  EXPECT_EQ(c.row(0)[1], 1);
  c = center_crop(im, 2, 2);  // offsets 2 and 1
  EXPECT_EQ(c.row(0)[0], 2);
  EXPECT_EQ(c.row(0)[1], 1);
  EXPECT_THROW(center_crop(im, 7, 2), Error);
  // Short side 5 -> 10: long side trunc(10 * 6 / 5) = 12.
  Image r = resize_short_side(im, 10, ResizeFilter::kBicubic);
  EXPECT_EQ(r.width, 12);
  EXPECT_EQ(r.height, 10);
  r = resize_short_side(Image::blank(333, 500), 224, ResizeFilter::kBicubic);  // trunc(336.336...)
  EXPECT_EQ(r.width, 224);
  EXPECT_EQ(r.height, 336);
}

// A window of a resize must be the same bytes as cropping the whole resize, for enlarging and
// shrinking on either axis, both filters, windows at the edges and in the middle.
TEST(ImageResize, WindowEqualsCropOfTheWholeResize) {
  std::mt19937 rng(11);
  auto crop = [](const Image& im, const Window& w) {
    Image out = Image::blank(w.width, w.height);
    for (int y = 0; y < w.height; ++y) std::copy_n(im.row(w.y + y) + 3 * w.x, 3 * w.width, out.row(y));
    return out;
  };
  struct Sizes {
    int in_w, in_h, out_w, out_h;
  };
  for (Sizes s : {Sizes{37, 11, 130, 40}, Sizes{301, 64, 1052, 224}, Sizes{500, 333, 33, 22}, Sizes{40, 90, 40, 31},
                  Sizes{29, 50, 64, 50}, Sizes{7, 7, 224, 224}})
    for (ResizeFilter f : {ResizeFilter::kBilinear, ResizeFilter::kBicubic}) {
      Image im = Image::blank(s.in_w, s.in_h);
      for (uint8_t& p : im.pixels) p = static_cast<uint8_t>(rng());
      Image whole = resize(im, s.out_w, s.out_h, f);
      for (Window w : {Window{0, 0, s.out_w, s.out_h}, center_window(s.out_w, s.out_h, s.out_w / 2 + 1, s.out_h / 3 + 1),
                       Window{0, 0, 1, 1}, Window{s.out_w - 3, s.out_h - 2, 3, 2}})
        EXPECT_EQ(resize_window(im, s.out_w, s.out_h, w, f).pixels, crop(whole, w).pixels)
            << s.in_w << "x" << s.in_h << " -> " << s.out_w << "x" << s.out_h << " window " << w.width << "x" << w.height
            << " at " << w.x << "," << w.y;
    }
  Image im = Image::blank(301, 64);
  for (uint8_t& p : im.pixels) p = static_cast<uint8_t>(rng());
  EXPECT_EQ(resize_short_side_center_crop(im, 224, 224, ResizeFilter::kBicubic).pixels,
            center_crop(resize_short_side(im, 224, ResizeFilter::kBicubic), 224, 224).pixels);
  EXPECT_THROW(resize_window(im, 100, 100, Window{90, 0, 20, 10}, ResizeFilter::kBicubic), Error);
  EXPECT_THROW(resize_window(im, 100, 100, Window{0, 0, 0, 10}, ResizeFilter::kBicubic), Error);
}

// Expects `bytes` to fail with one line that contains `words`.
void expect_one_line_error(std::span<const uint8_t> bytes, const std::string& words,
                           const DecodeOptions& options = {}) {
  try {
    Image im = decode_image(bytes, options);
    ADD_FAILURE() << "decoded a " << im.width << "x" << im.height << " image";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find(words), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_LT(m.size(), 300u) << m;
  }
}

TEST(ImageBadInput, EveryBadFileGivesOneLineError) {
  int cases = 0;
  for (const auto& f : manifest("bad")) {
    SCOPED_TRACE(f[0]);
    std::string words;
    for (size_t i = 1; i < f.size(); ++i) words += (i > 1 ? " " : "") + f[i];
    expect_one_line_error(read_bytes(case_path(f[0])), words);
    ++cases;
  }
  EXPECT_EQ(cases, 15);
}

TEST(ImageBadInput, TruncatedFilesFail) {
  int cases = 0;
  for (const auto& f : manifest("decode")) {
    if (f[0].find("anim") != std::string::npos) continue;  // half an animation may hold all of frame 0
    std::vector<uint8_t> bytes = read_bytes(case_path(f[0]));
    for (size_t keep : {bytes.size() / 2, size_t{30}, size_t{9}, size_t{3}}) {
      SCOPED_TRACE(f[0] + " cut to " + std::to_string(keep));
      // Too short to recognise, a file fails as an unknown format; longer, the error names its format.
      expect_one_line_error(std::span(bytes).first(keep),
                            keep >= 30 ? format_name(format_of_name(f[0])) + std::string(":") : "");
      ++cases;
    }
  }
  EXPECT_GT(cases, 300);
}

// Flipped bytes anywhere (headers, palettes, EXIF, compressed data): a decode either succeeds
// or throws Error; under the asan preset this also checks for overreads and leaks.
TEST(ImageBadInput, MutatedFilesDecodeOrFailCleanly) {
  std::mt19937 rng(11);
  int failures = 0, decodes = 0;
  std::vector<std::string> names;
  for (const auto& f : manifest("decode")) names.push_back(f[0]);
  for (const auto& f : manifest("exif")) names.push_back(f[0]);
  for (const std::string& name : names) {
    const std::vector<uint8_t> original = read_bytes(case_path(name));
    for (int round = 0; round < 12; ++round) {
      std::vector<uint8_t> bytes = original;
      // Early rounds hit the first 64 bytes, where the headers live; later ones anywhere.
      size_t span = round < 6 ? std::min<size_t>(64, bytes.size()) : bytes.size();
      for (int k = 0; k < 1 + round % 3; ++k) bytes[rng() % span] ^= static_cast<uint8_t>(1 + rng() % 255);
      try {
        Image im = decode_image(bytes);
        EXPECT_EQ(im.pixels.size(), static_cast<size_t>(im.width) * im.height * 3) << name;
        ++decodes;
      } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
        ++failures;
      }
    }
  }
  EXPECT_GT(failures, 0);
  EXPECT_GT(decodes, 0);
}

TEST(ImageBadInput, PixelLimitIsCheckedForEveryFormat) {
  for (const char* name : {"noise_50x50_444.jpg", "noise_50x50_rgb.png", "noise_50x50_24.bmp", "noise_50x50_plain.gif",
                           "noise_50x50_lossless.webp", "noise_50x50_anim.webp"}) {
    SCOPED_TRACE(name);
    std::vector<uint8_t> bytes = read_bytes(case_path(name));
    expect_one_line_error(bytes, "2500 pixels, over the limit of 2499", {.max_pixels = 2499});
    EXPECT_EQ(decode_image(bytes, {.max_pixels = 2500}).width, 50);
  }
}

TEST(ImageBadInput, EmptyAndUnknownInput) {
  expect_one_line_error({}, "input is empty");
  std::vector<uint8_t> text = {'B', 'M', ' ', 'i', 's', ' ', 'a', ' ', 'w', 'o', 'r', 'd', '\n', 0, 1, 2, 3, 4, 5};
  expect_one_line_error(text, "unrecognised format");
}

}  // namespace
}  // namespace mminfer::image
