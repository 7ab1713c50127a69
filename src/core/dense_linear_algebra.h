// Small dense linear algebra in double precision for offline model rewriting (pruning refits,
// low-rank factors): sizes up to a few thousand, run once per model, never on a request's path.
// Matrices are row-major std::vector<double>.
#pragma once
#include <cstdint>
#include <vector>

namespace mminfer {

using DenseMatrix = std::vector<double>;

// Cholesky factor of a symmetric positive definite A [n, n]: A = L Lᵀ, L written into A's lower
// triangle (the upper is left as it was). False when A is not positive definite.
bool cholesky_factor(DenseMatrix& a, int64_t n);

// With A factored by cholesky_factor: B [n, m] becomes A⁻¹ B.
void cholesky_solve_factored(const DenseMatrix& l, DenseMatrix& b, int64_t n, int64_t m);

// B [n, m] becomes L⁻ᵀ B for the lower-triangular L of cholesky_factor.
void solve_lower_transposed(const DenseMatrix& l, DenseMatrix& b, int64_t n, int64_t m);

// Thin singular value decomposition M = U diag(s) Vᵀ of M [rows, cols] by one-sided Jacobi
// rotations: k = min(rows, cols) singular values, descending; U [rows, k], V [cols, k].
struct Svd {
  DenseMatrix u, v;
  std::vector<double> s;
  int64_t k = 0;
};
Svd jacobi_svd(const DenseMatrix& m, int64_t rows, int64_t cols);

}  // namespace mminfer
