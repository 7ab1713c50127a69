#include "pipelines/ocr/crop.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace mminfer::ocr {

namespace {

// The homography H (row-major 3x3, h22 = 1) with H·from[i] ~ to[i], by Gaussian elimination of
// the 8x8 system. False when the points are degenerate.
bool homography(const std::array<Point, 4>& from, const std::array<Point, 4>& to, std::array<double, 9>& h) {
  double a[8][9] = {};
  for (int i = 0; i < 4; ++i) {
    double x = from[i].x, y = from[i].y, u = to[i].x, v = to[i].y;
    double r0[9] = {x, y, 1, 0, 0, 0, -u * x, -u * y, u};
    double r1[9] = {0, 0, 0, x, y, 1, -v * x, -v * y, v};
    std::copy(r0, r0 + 9, a[2 * i]);
    std::copy(r1, r1 + 9, a[2 * i + 1]);
  }
  for (int c = 0; c < 8; ++c) {
    int piv = c;
    for (int r = c + 1; r < 8; ++r)
      if (std::fabs(a[r][c]) > std::fabs(a[piv][c])) piv = r;
    if (std::fabs(a[piv][c]) < 1e-12) return false;
    std::swap(a[c], a[piv]);
    for (int r = 0; r < 8; ++r) {
      if (r == c) continue;
      double f = a[r][c] / a[c][c];
      for (int k = c; k < 9; ++k) a[r][k] -= f * a[c][k];
    }
  }
  for (int i = 0; i < 8; ++i) h[i] = a[i][8] / a[i][i];
  h[8] = 1;
  return true;
}

// Bilinear sample at (x, y) with edges replicated.
void sample(const Image& s, double x, double y, uint8_t* out) {
  x = std::clamp(x, 0.0, static_cast<double>(s.width - 1));
  y = std::clamp(y, 0.0, static_cast<double>(s.height - 1));
  int x0 = static_cast<int>(x), y0 = static_cast<int>(y);
  int x1 = std::min(x0 + 1, s.width - 1), y1 = std::min(y0 + 1, s.height - 1);
  double fx = x - x0, fy = y - y0;
  const uint8_t* p = s.pixels.data();
  size_t row = static_cast<size_t>(s.width) * 3;
  for (int c = 0; c < 3; ++c) {
    double top = p[y0 * row + x0 * 3 + c] * (1 - fx) + p[y0 * row + x1 * 3 + c] * fx;
    double bot = p[y1 * row + x0 * 3 + c] * (1 - fx) + p[y1 * row + x1 * 3 + c] * fx;
    out[c] = static_cast<uint8_t>(std::clamp(std::lround(top * (1 - fy) + bot * fy), 0L, 255L));
  }
}

Image rotate_90_ccw(const Image& s) {
  Image r = Image::blank(s.height, s.width);
  for (int y = 0; y < s.height; ++y)
    for (int x = 0; x < s.width; ++x)
      for (int c = 0; c < 3; ++c)
        r.pixels[(static_cast<size_t>(s.width - 1 - x) * r.width + y) * 3 + c] =
            s.pixels[(static_cast<size_t>(y) * s.width + x) * 3 + c];
  return r;
}

}  // namespace

Image crop_quad(const Image& src, const Quad& q) {
  auto len = [](const Point& a, const Point& b) { return std::hypot(a.x - b.x, a.y - b.y); };
  int w = std::max(1, static_cast<int>(std::max(len(q[0], q[1]), len(q[3], q[2]))));
  int h = std::max(1, static_cast<int>(std::max(len(q[0], q[3]), len(q[1], q[2]))));
  Image out = Image::blank(w, h);
  std::array<double, 9> m{};
  std::array<Point, 4> rect = {Point{0, 0}, Point{static_cast<double>(w), 0}, Point{static_cast<double>(w), static_cast<double>(h)},
                               Point{0, static_cast<double>(h)}};
  if (src.width == 0 || src.height == 0) return out;
  if (!homography(rect, {q[0], q[1], q[2], q[3]}, m)) {  // a degenerate quad: sample its first corner
    for (size_t i = 0; i < out.pixels.size(); i += 3) sample(src, q[0].x, q[0].y, &out.pixels[i]);
    return out;
  }
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      double d = m[6] * x + m[7] * y + m[8];
      double sx = (m[0] * x + m[1] * y + m[2]) / d, sy = (m[3] * x + m[4] * y + m[5]) / d;
      sample(src, sx, sy, &out.pixels[(static_cast<size_t>(y) * w + x) * 3]);
    }
  if (h >= 1.5 * w) return rotate_90_ccw(out);
  return out;
}

void rotate_180(Image& img) {
  size_t n = static_cast<size_t>(img.width) * img.height;
  for (size_t i = 0, j = n; i < j--; ++i)
    for (int c = 0; c < 3; ++c) std::swap(img.pixels[i * 3 + c], img.pixels[j * 3 + c]);
}

Image resize_bilinear(const Image& src, int width, int height) {
  Image out = Image::blank(width, height);
  if (src.width == 0 || src.height == 0) return out;
  double rx = static_cast<double>(src.width) / width, ry = static_cast<double>(src.height) / height;
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      sample(src, std::max(0.0, (x + 0.5) * rx - 0.5), std::max(0.0, (y + 0.5) * ry - 0.5),
             &out.pixels[(static_cast<size_t>(y) * width + x) * 3]);
  return out;
}

}  // namespace mminfer::ocr
