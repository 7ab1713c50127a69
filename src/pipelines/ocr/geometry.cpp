#include "pipelines/ocr/geometry.h"

#include <algorithm>
#include <cmath>

namespace mminfer::ocr {

namespace {

double cross(const Point& o, const Point& a, const Point& b) { return (a.x - o.x) * (b.y - o.y) - (a.y - o.y) * (b.x - o.x); }
double dist(const Point& a, const Point& b) { return std::hypot(a.x - b.x, a.y - b.y); }

}  // namespace

std::vector<Point> convex_hull(std::vector<Point> pts) {
  std::sort(pts.begin(), pts.end(), [](const Point& a, const Point& b) { return a.x < b.x || (a.x == b.x && a.y < b.y); });
  pts.erase(std::unique(pts.begin(), pts.end(), [](const Point& a, const Point& b) { return a.x == b.x && a.y == b.y; }),
            pts.end());
  if (pts.size() < 3) return pts;
  std::vector<Point> hull(2 * pts.size());
  size_t k = 0;
  for (const Point& p : pts) {  // lower hull
    while (k >= 2 && cross(hull[k - 2], hull[k - 1], p) <= 0) --k;
    hull[k++] = p;
  }
  for (size_t i = pts.size() - 1, lower = k + 1; i-- > 0;) {  // upper hull
    while (k >= lower && cross(hull[k - 2], hull[k - 1], pts[i]) <= 0) --k;
    hull[k++] = pts[i];
  }
  hull.resize(k - 1);
  return hull;
}

Quad order_corners(Quad q) {
  std::sort(q.begin(), q.end(), [](const Point& a, const Point& b) { return a.x < b.x; });
  Point l0 = q[0], l1 = q[1], r0 = q[2], r1 = q[3];
  if (l1.y < l0.y) std::swap(l0, l1);
  if (r1.y < r0.y) std::swap(r0, r1);
  return {l0, r0, r1, l1};
}

Quad min_area_rect(const std::vector<Point>& pts) {
  std::vector<Point> hull = convex_hull(pts);
  if (hull.empty()) return {};
  if (hull.size() == 1) return {hull[0], hull[0], hull[0], hull[0]};
  double best = INFINITY;
  Quad out{};
  for (size_t i = 0; i < hull.size(); ++i) {
    const Point& a = hull[i];
    const Point& b = hull[(i + 1) % hull.size()];
    double len = dist(a, b);
    if (len == 0) continue;
    double ux = (b.x - a.x) / len, uy = (b.y - a.y) / len;  // edge direction
    double vx = -uy, vy = ux;                                // its normal
    double umin = INFINITY, umax = -INFINITY, vmin = INFINITY, vmax = -INFINITY;
    for (const Point& p : hull) {
      double u = (p.x - a.x) * ux + (p.y - a.y) * uy, v = (p.x - a.x) * vx + (p.y - a.y) * vy;
      umin = std::min(umin, u), umax = std::max(umax, u), vmin = std::min(vmin, v), vmax = std::max(vmax, v);
    }
    double area = (umax - umin) * (vmax - vmin);
    if (area < best) {
      best = area;
      auto at = [&](double u, double v) { return Point{a.x + u * ux + v * vx, a.y + u * uy + v * vy}; };
      out = {at(umin, vmin), at(umax, vmin), at(umax, vmax), at(umin, vmax)};
    }
  }
  return order_corners(out);
}

double polygon_area(const Quad& q) {
  double s = 0;
  for (size_t i = 0; i < 4; ++i) s += q[i].x * q[(i + 1) % 4].y - q[(i + 1) % 4].x * q[i].y;
  return std::fabs(s) / 2;
}

double polygon_perimeter(const Quad& q) {
  double s = 0;
  for (size_t i = 0; i < 4; ++i) s += dist(q[i], q[(i + 1) % 4]);
  return s;
}

double short_side(const Quad& q) { return std::min(dist(q[0], q[1]), dist(q[1], q[2])); }

Quad expand_rect(const Quad& q, double d) {
  // Unit vectors along the top edge and down the left edge; each corner moves outwards on both.
  double w = dist(q[0], q[1]), h = dist(q[0], q[3]);
  double ux = w > 0 ? (q[1].x - q[0].x) / w : 1, uy = w > 0 ? (q[1].y - q[0].y) / w : 0;
  double vx = h > 0 ? (q[3].x - q[0].x) / h : -uy, vy = h > 0 ? (q[3].y - q[0].y) / h : ux;
  auto move = [&](const Point& p, double su, double sv) { return Point{p.x + d * (su * ux + sv * vx), p.y + d * (su * uy + sv * vy)}; };
  return order_corners({move(q[0], -1, -1), move(q[1], 1, -1), move(q[2], 1, 1), move(q[3], -1, 1)});
}

}  // namespace mminfer::ocr
