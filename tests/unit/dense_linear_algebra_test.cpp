#include "core/dense_linear_algebra.h"

#include <cmath>
#include <random>

#include <gtest/gtest.h>

namespace mminfer {
namespace {

DenseMatrix random_matrix(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal;
  DenseMatrix m(static_cast<size_t>(rows * cols));
  for (double& x : m) x = normal(rng);
  return m;
}

double max_abs_diff(const DenseMatrix& a, const DenseMatrix& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

// Aᵀ A for A [rows, cols].
DenseMatrix gram(const DenseMatrix& a, int64_t rows, int64_t cols) {
  DenseMatrix g(static_cast<size_t>(cols * cols), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < cols; ++i)
      for (int64_t j = 0; j < cols; ++j) g[i * cols + j] += a[r * cols + i] * a[r * cols + j];
  return g;
}

TEST(DenseLinearAlgebra, CholeskySolvesSymmetricPositiveDefiniteSystems) {
  const int64_t n = 37, m = 5;
  DenseMatrix a = gram(random_matrix(60, n, 1), 60, n), x = random_matrix(n, m, 2), b(static_cast<size_t>(n * m), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < m; ++j) b[i * m + j] += a[i * n + k] * x[k * m + j];
  ASSERT_TRUE(cholesky_factor(a, n));
  cholesky_solve_factored(a, b, n, m);
  EXPECT_LT(max_abs_diff(b, x), 1e-9);
}

TEST(DenseLinearAlgebra, CholeskyRefusesIndefiniteMatrices) {
  DenseMatrix a = {1, 2, 2, 1};  // eigenvalues 3 and -1
  EXPECT_FALSE(cholesky_factor(a, 2));
}

void expect_svd_holds(int64_t rows, int64_t cols, uint32_t seed) {
  SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
  DenseMatrix m = random_matrix(rows, cols, seed);
  Svd s = jacobi_svd(m, rows, cols);
  const int64_t k = std::min(rows, cols);
  ASSERT_EQ(s.k, k);
  for (int64_t j = 0; j + 1 < k; ++j) EXPECT_GE(s.s[j], s.s[j + 1]);
  DenseMatrix back(static_cast<size_t>(rows * cols), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t j = 0; j < k; ++j) back[r * cols + c] += s.u[r * k + j] * s.s[j] * s.v[c * k + j];
  EXPECT_LT(max_abs_diff(back, m), 1e-9);
  // Orthonormal columns on both sides.
  DenseMatrix eye(static_cast<size_t>(k * k), 0.0);
  for (int64_t j = 0; j < k; ++j) eye[j * k + j] = 1;
  EXPECT_LT(max_abs_diff(gram(s.u, rows, k), eye), 1e-9);
  EXPECT_LT(max_abs_diff(gram(s.v, cols, k), eye), 1e-9);
}

TEST(DenseLinearAlgebra, JacobiSvdReconstructsTallWideAndSquareMatrices) {
  expect_svd_holds(23, 9, 3);
  expect_svd_holds(9, 23, 4);
  expect_svd_holds(16, 16, 5);
  expect_svd_holds(1, 7, 6);
}

TEST(DenseLinearAlgebra, JacobiSvdFindsKnownSingularValuesAndRank) {
  // diag(5, 3, 0) rotated on both sides keeps singular values 5, 3, 0.
  const double c = std::cos(0.3), s = std::sin(0.3);
  DenseMatrix left = {c, -s, 0, s, c, 0, 0, 0, 1}, right = {1, 0, 0, 0, c, s, 0, -s, c};
  DenseMatrix d = {5, 0, 0, 0, 3, 0, 0, 0, 0}, ld(9, 0.0), m(9, 0.0);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 3; ++k) ld[i * 3 + j] += left[i * 3 + k] * d[k * 3 + j];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 3; ++k) m[i * 3 + j] += ld[i * 3 + k] * right[k * 3 + j];
  Svd out = jacobi_svd(m, 3, 3);
  EXPECT_NEAR(out.s[0], 5, 1e-12);
  EXPECT_NEAR(out.s[1], 3, 1e-12);
  EXPECT_NEAR(out.s[2], 0, 1e-12);
}

}  // namespace
}  // namespace mminfer
