#include "core/dense_linear_algebra.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/parallel.h"

namespace mminfer {

bool cholesky_factor(DenseMatrix& a, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    double d = a[j * n + j];
    for (int64_t k = 0; k < j; ++k) d -= a[j * n + k] * a[j * n + k];
    if (!(d > 0)) return false;
    const double l = std::sqrt(d);
    a[j * n + j] = l;
    parallel_for(n - j - 1, 64, [&](int64_t begin, int64_t end) {
      const double* aj = &a[j * n];
      for (int64_t i = j + 1 + begin; i < j + 1 + end; ++i) {
        double* ai = &a[i * n];
        double s = ai[j];
        for (int64_t k = 0; k < j; ++k) s -= ai[k] * aj[k];
        ai[j] = s / l;
      }
    });
  }
  return true;
}

void solve_lower_transposed(const DenseMatrix& l, DenseMatrix& b, int64_t n, int64_t m) {
  for (int64_t i = n - 1; i >= 0; --i) {
    double* bi = &b[i * m];
    for (int64_t k = i + 1; k < n; ++k) {
      const double f = l[k * n + i];
      if (f == 0.0) continue;
      const double* bk = &b[k * m];
      for (int64_t j = 0; j < m; ++j) bi[j] -= f * bk[j];
    }
    const double d = l[i * n + i];
    for (int64_t j = 0; j < m; ++j) bi[j] /= d;
  }
}

void cholesky_solve_factored(const DenseMatrix& l, DenseMatrix& b, int64_t n, int64_t m) {
  for (int64_t i = 0; i < n; ++i) {  // L y = b
    double* bi = &b[i * m];
    for (int64_t k = 0; k < i; ++k) {
      const double f = l[i * n + k];
      if (f == 0.0) continue;
      const double* bk = &b[k * m];
      for (int64_t j = 0; j < m; ++j) bi[j] -= f * bk[j];
    }
    const double d = l[i * n + i];
    for (int64_t j = 0; j < m; ++j) bi[j] /= d;
  }
  solve_lower_transposed(l, b, n, m);  // Lᵀ x = y
}

namespace {

// Orthogonalizes the columns of A (stored column by column: `cols` columns of `len` values) by
// Jacobi rotations, applying the same rotations to V's columns (of `cols` values).
void orthogonalize_columns(std::vector<double>& a, int64_t len, int64_t cols, std::vector<double>& v) {
  std::vector<double> norm(static_cast<size_t>(cols));
  auto dot = [&](const double* x, const double* y) {
    double s = 0;
    for (int64_t i = 0; i < len; ++i) s += x[i] * y[i];
    return s;
  };
  for (int64_t j = 0; j < cols; ++j) norm[j] = dot(&a[j * len], &a[j * len]);
  const double eps = 1e-13;
  for (int sweep = 0; sweep < 60; ++sweep) {
    bool rotated = false;
    for (int64_t p = 0; p + 1 < cols; ++p) {
      for (int64_t q = p + 1; q < cols; ++q) {
        double* ap = &a[p * len];
        double* aq = &a[q * len];
        const double alpha = norm[p], beta = norm[q];
        if (alpha == 0.0 || beta == 0.0) continue;
        const double gamma = dot(ap, aq);
        if (std::fabs(gamma) <= eps * std::sqrt(alpha * beta)) continue;
        rotated = true;
        const double zeta = (beta - alpha) / (2 * gamma);
        const double t = (zeta >= 0 ? 1.0 : -1.0) / (std::fabs(zeta) + std::sqrt(1 + zeta * zeta));
        const double c = 1 / std::sqrt(1 + t * t), s = c * t;
        for (int64_t i = 0; i < len; ++i) {
          const double x = ap[i], y = aq[i];
          ap[i] = c * x - s * y;
          aq[i] = s * x + c * y;
        }
        double* vp = &v[p * cols];
        double* vq = &v[q * cols];
        for (int64_t i = 0; i < cols; ++i) {
          const double x = vp[i], y = vq[i];
          vp[i] = c * x - s * y;
          vq[i] = s * x + c * y;
        }
        // Exact for the rotation that zeroes gamma; recomputed each sweep against drift.
        norm[p] = alpha - t * gamma;
        norm[q] = beta + t * gamma;
      }
    }
    for (int64_t j = 0; j < cols; ++j) norm[j] = dot(&a[j * len], &a[j * len]);
    if (!rotated) break;
  }
}

}  // namespace

Svd jacobi_svd(const DenseMatrix& m, int64_t rows, int64_t cols) {
  // Rotate the columns of whichever of M, Mᵀ has fewer: M V = U S, or Mᵀ U = V S.
  const bool transposed = cols > rows;
  const int64_t len = transposed ? cols : rows, k = transposed ? rows : cols;
  std::vector<double> a(static_cast<size_t>(len * k)), w(static_cast<size_t>(k * k), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const double x = m[r * cols + c];
      if (transposed) a[r * len + c] = x;  // column r of Mᵀ
      else a[c * len + r] = x;             // column c of M
    }
  for (int64_t j = 0; j < k; ++j) w[j * k + j] = 1.0;
  orthogonalize_columns(a, len, k, w);
  std::vector<double> sigma(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) {
    double s = 0;
    for (int64_t i = 0; i < len; ++i) s += a[j * len + i] * a[j * len + i];
    sigma[j] = std::sqrt(s);
  }
  std::vector<int64_t> order(static_cast<size_t>(k));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return sigma[x] > sigma[y]; });
  Svd out;
  out.k = k;
  out.s.resize(static_cast<size_t>(k));
  // The rotated columns, normalized, are the singular vectors on the long side; the rotations
  // accumulated in w are those on the short side.
  DenseMatrix long_side(static_cast<size_t>(len * k), 0.0), short_side(static_cast<size_t>(k * k));
  for (int64_t j = 0; j < k; ++j) {
    const int64_t src = order[j];
    out.s[j] = sigma[src];
    const double inv = sigma[src] > 0 ? 1 / sigma[src] : 0;
    for (int64_t i = 0; i < len; ++i) long_side[i * k + j] = a[src * len + i] * inv;
    for (int64_t i = 0; i < k; ++i) short_side[i * k + j] = w[src * k + i];
  }
  if (transposed) out.u = std::move(short_side), out.v = std::move(long_side);
  else out.u = std::move(long_side), out.v = std::move(short_side);
  return out;
}

}  // namespace mminfer
