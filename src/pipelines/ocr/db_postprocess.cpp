#include "pipelines/ocr/db_postprocess.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace mminfer::ocr {

namespace {

// Boundary pixels of every 8-connected region of `mask` (pixels with a 4-neighbour outside it):
// the same hulls as the regions' outer contours, far fewer points than the regions themselves.
std::vector<std::vector<Point>> region_outlines(const std::vector<uint8_t>& mask, int h, int w, int max_regions) {
  std::vector<int32_t> label(mask.size(), -1);
  std::vector<std::vector<Point>> out;
  std::vector<int> stack;
  auto inside = [&](int y, int x) { return y >= 0 && y < h && x >= 0 && x < w && mask[static_cast<size_t>(y) * w + x]; };
  for (int start = 0; start < h * w; ++start) {
    if (!mask[start] || label[start] >= 0) continue;
    if (static_cast<int>(out.size()) >= max_regions) break;
    int id = static_cast<int>(out.size());
    out.emplace_back();
    label[start] = id;
    stack.assign(1, start);
    while (!stack.empty()) {
      int i = stack.back();
      stack.pop_back();
      int y = i / w, x = i % w;
      if (!inside(y - 1, x) || !inside(y + 1, x) || !inside(y, x - 1) || !inside(y, x + 1))
        out[id].push_back({static_cast<double>(x), static_cast<double>(y)});
      for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) {
          int ny = y + dy, nx = x + dx;
          if ((dy || dx) && inside(ny, nx) && label[static_cast<size_t>(ny) * w + nx] < 0) {
            label[static_cast<size_t>(ny) * w + nx] = id;
            stack.push_back(ny * w + nx);
          }
        }
    }
  }
  return out;
}

// Mean of `prob` over the pixels whose centres fall inside the quad (convex, so a pixel is in
// when it is on the inner side of all four edges).
float mean_inside(const float* prob, int h, int w, const Quad& q) {
  double x0 = w, x1 = 0, y0 = h, y1 = 0;
  for (const Point& p : q) x0 = std::min(x0, p.x), x1 = std::max(x1, p.x), y0 = std::min(y0, p.y), y1 = std::max(y1, p.y);
  int xa = std::clamp(static_cast<int>(std::floor(x0)), 0, w - 1), xb = std::clamp(static_cast<int>(std::ceil(x1)), 0, w - 1);
  int ya = std::clamp(static_cast<int>(std::floor(y0)), 0, h - 1), yb = std::clamp(static_cast<int>(std::ceil(y1)), 0, h - 1);
  double orient = 0;  // sign of the quad's winding
  for (int i = 0; i < 4; ++i) orient += q[i].x * q[(i + 1) % 4].y - q[(i + 1) % 4].x * q[i].y;
  double sum = 0;
  int64_t n = 0;
  for (int y = ya; y <= yb; ++y)
    for (int x = xa; x <= xb; ++x) {
      bool in = true;
      for (int i = 0; i < 4 && in; ++i) {
        const Point &a = q[i], &b = q[(i + 1) % 4];
        double c = (b.x - a.x) * (y - a.y) - (b.y - a.y) * (x - a.x);
        in = orient >= 0 ? c >= -1e-9 : c <= 1e-9;
      }
      if (in) sum += prob[static_cast<size_t>(y) * w + x], ++n;
    }
  return n ? static_cast<float>(sum / static_cast<double>(n)) : 0.f;
}

}  // namespace

std::vector<DetectedBox> db_boxes(const float* prob, int map_h, int map_w, int orig_w, int orig_h, const DbParams& p) {
  std::vector<DetectedBox> boxes;
  if (map_h <= 0 || map_w <= 0) return boxes;
  std::vector<uint8_t> mask(static_cast<size_t>(map_h) * map_w);
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = prob[i] > p.threshold;
  double sx = static_cast<double>(orig_w) / map_w, sy = static_cast<double>(orig_h) / map_h;
  for (const std::vector<Point>& outline : region_outlines(mask, map_h, map_w, p.max_candidates)) {
    Quad box = min_area_rect(outline);
    if (short_side(box) < p.min_size) continue;
    float score = mean_inside(prob, map_h, map_w, box);
    if (score < p.box_threshold) continue;
    double perimeter = polygon_perimeter(box);
    if (perimeter <= 0) continue;
    Quad grown = expand_rect(box, polygon_area(box) * p.unclip_ratio / perimeter);
    if (short_side(grown) < p.min_size + 2) continue;
    DetectedBox d;
    d.score = score;
    for (int i = 0; i < 4; ++i)
      d.quad[i] = {std::clamp(std::round(grown[i].x * sx), 0.0, static_cast<double>(orig_w)),
                   std::clamp(std::round(grown[i].y * sy), 0.0, static_cast<double>(orig_h))};
    boxes.push_back(d);
  }
  sort_reading_order(boxes);
  return boxes;
}

void sort_reading_order(std::vector<DetectedBox>& boxes) {
  std::stable_sort(boxes.begin(), boxes.end(), [](const DetectedBox& a, const DetectedBox& b) {
    return a.quad[0].y < b.quad[0].y || (a.quad[0].y == b.quad[0].y && a.quad[0].x < b.quad[0].x);
  });
  // Boxes on the same line (tops within 10 px) go left to right: a bubble pass, as PP-OCR does.
  for (size_t i = 0; i + 1 < boxes.size(); ++i)
    for (size_t j = i + 1; j-- > 0;) {
      if (std::fabs(boxes[j + 1].quad[0].y - boxes[j].quad[0].y) < 10 && boxes[j + 1].quad[0].x < boxes[j].quad[0].x)
        std::swap(boxes[j], boxes[j + 1]);
      else
        break;
    }
}

}  // namespace mminfer::ocr
