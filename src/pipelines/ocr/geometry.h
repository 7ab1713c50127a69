// Plane geometry for text boxes: convex hull, minimum-area rectangle, polygon measures.
#pragma once
#include <array>
#include <vector>

namespace mminfer::ocr {

struct Point {
  double x = 0, y = 0;
};

// A rotated rectangle as four corners: top-left, top-right, bottom-right, bottom-left in image
// orientation (x right, y down), the order text crops are taken in.
using Quad = std::array<Point, 4>;

// Convex hull, counter-clockwise, without collinear points (Andrew's monotone chain).
std::vector<Point> convex_hull(std::vector<Point> pts);

// The smallest-area rectangle enclosing the points (rotating calipers over the hull edges).
// Corners come ordered as for Quad. Degenerate inputs give a zero-size quad at the points.
Quad min_area_rect(const std::vector<Point>& pts);

double polygon_area(const Quad& q);       // absolute area
double polygon_perimeter(const Quad& q);
double short_side(const Quad& q);

// Grows a rectangle by `d` on every side (what offsetting a rectangle's outline by d and taking
// the minimum-area rectangle of the result gives).
Quad expand_rect(const Quad& q, double d);

// Orders four corners as top-left, top-right, bottom-right, bottom-left: the two leftmost by x
// give the left side, each side's upper point comes first.
Quad order_corners(Quad q);

}  // namespace mminfer::ocr
