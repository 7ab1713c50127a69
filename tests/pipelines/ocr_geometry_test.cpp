// OCR post-processing pieces on inputs whose answers are known exactly.
#include <gtest/gtest.h>

#include <cmath>

#include "pipelines/ocr/crop.h"
#include "pipelines/ocr/ctc.h"
#include "pipelines/ocr/db_postprocess.h"
#include "pipelines/ocr/geometry.h"

using namespace mminfer::ocr;

namespace {

std::vector<Point> rotated_rect_points(double cx, double cy, double w, double h, double angle) {
  std::vector<Point> pts;
  double c = std::cos(angle), s = std::sin(angle);
  for (double u = -w / 2; u <= w / 2; u += 0.5)
    for (double v = -h / 2; v <= h / 2; v += 0.5) pts.push_back({cx + u * c - v * s, cy + u * s + v * c});
  return pts;
}

}  // namespace

TEST(OcrGeometry, MinAreaRectRecoversRotatedRectangles) {
  for (double angle : {0.0, 0.2, -0.35, 0.7}) {
    Quad q = min_area_rect(rotated_rect_points(50, 40, 30, 8, angle));
    EXPECT_NEAR(polygon_area(q), 30.0 * 8.0, 1.0) << angle;
    EXPECT_NEAR(short_side(q), 8.0, 0.05) << angle;
    double cx = 0, cy = 0;
    for (const Point& p : q) cx += p.x / 4, cy += p.y / 4;
    EXPECT_NEAR(cx, 50, 1e-6);
    EXPECT_NEAR(cy, 40, 1e-6);
    EXPECT_LE(q[0].x, q[1].x);  // top-left before top-right
    EXPECT_LE(q[0].y, q[3].y);  // top before bottom
  }
  EXPECT_EQ(convex_hull({{0, 0}, {1, 1}, {2, 2}, {0, 2}, {2, 0}, {1, 1}}).size(), 4u);
}

TEST(OcrGeometry, ExpandGrowsEverySide) {
  Quad q = {Point{10, 10}, Point{30, 10}, Point{30, 16}, Point{10, 16}};
  Quad g = expand_rect(q, 2);
  EXPECT_NEAR(g[0].x, 8, 1e-9);
  EXPECT_NEAR(g[0].y, 8, 1e-9);
  EXPECT_NEAR(g[2].x, 32, 1e-9);
  EXPECT_NEAR(g[2].y, 18, 1e-9);
}

TEST(OcrDb, TwoBlobsGiveTwoBoxesInReadingOrder) {
  const int h = 64, w = 96;
  std::vector<float> prob(h * w, 0.05f);
  auto fill = [&](int x0, int y0, int x1, int y1, float v) {
    for (int y = y0; y < y1; ++y)
      for (int x = x0; x < x1; ++x) prob[y * w + x] = v;
  };
  fill(50, 10, 90, 20, 0.9f);  // right, upper line
  fill(4, 11, 40, 21, 0.8f);   // left, same line: comes first
  fill(10, 40, 60, 52, 0.95f);
  fill(70, 45, 72, 47, 0.9f);  // too small
  fill(70, 56, 90, 62, 0.4f);  // above the pixel threshold, below the box threshold
  DbParams params;
  params.unclip_ratio = 1.5f;
  auto boxes = db_boxes(prob.data(), h, w, w * 2, h * 2, params);
  ASSERT_EQ(boxes.size(), 3u);
  EXPECT_LT(boxes[0].quad[0].x, boxes[1].quad[0].x);
  EXPECT_NEAR(boxes[0].score, 0.8f, 1e-5);
  EXPECT_GT(boxes[2].quad[0].y, boxes[1].quad[2].y);
  // Scaled by 2 and grown by area*1.5/perimeter: the first box is 36x10 map pixels.
  double d = 35.0 * 9.0 * 1.5 / (2 * (35.0 + 9.0));
  EXPECT_EQ(boxes[0].quad[0].x, 0);  // clipped to the image
  EXPECT_NEAR(boxes[0].quad[1].x, std::round((39 + d) * 2), 1.0);
  EXPECT_NEAR(boxes[0].quad[2].y, std::round((20 + d) * 2), 1.0);
}

TEST(OcrCtc, GreedyMergesRepeatsAndDropsBlanks) {
  std::vector<std::string> charset = {"a", "b", " "};
  // steps: a a blank a b b blank
  int seq[] = {1, 1, 0, 1, 2, 2, 0};
  std::vector<float> probs(7 * 4, 0.f);
  for (int t = 0; t < 7; ++t) probs[t * 4 + seq[t]] = 0.9f, probs[t * 4 + (seq[t] + 1) % 4] = 0.1f;
  Decoded d = ctc_greedy(probs.data(), 7, 4, charset);
  EXPECT_EQ(d.text, "aab");
  EXPECT_NEAR(d.score, 0.9f, 1e-6);
  EXPECT_EQ(ctc_greedy(probs.data(), 0, 4, charset).text, "");
}

TEST(OcrCrop, UprightQuadCropsExactlyAndTallCropsTurn) {
  Image img = Image::blank(8, 6);
  for (int y = 0; y < 6; ++y)
    for (int x = 0; x < 8; ++x)
      for (int c = 0; c < 3; ++c) img.pixels[(y * 8 + x) * 3 + c] = static_cast<uint8_t>(y * 30 + x * 3 + c);
  Image c = crop_quad(img, {Point{2, 1}, Point{6, 1}, Point{6, 4}, Point{2, 4}});
  ASSERT_EQ(c.width, 4);
  ASSERT_EQ(c.height, 3);
  EXPECT_EQ(c.pixels[0], img.pixels[(1 * 8 + 2) * 3]);
  EXPECT_EQ(c.pixels[(2 * 4 + 3) * 3 + 2], img.pixels[(3 * 8 + 5) * 3 + 2]);
  Image tall = crop_quad(img, {Point{1, 0}, Point{3, 0}, Point{3, 6}, Point{1, 6}});
  EXPECT_EQ(tall.width, 6);
  EXPECT_EQ(tall.height, 2);
  Image r = c;
  rotate_180(r);
  EXPECT_EQ(r.pixels[0], c.pixels[(3 * 4 - 1) * 3]);
}
