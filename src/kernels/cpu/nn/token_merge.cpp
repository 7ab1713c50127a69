// mminfer::TokenMerge: token merging between a ViT block's attention and its MLP (ToMe-style
// bipartite soft matching), which merge_tokens inserts.
//   inputs: x [B, T, D] (the residual stream), metric [B, T, C] (what similarity is measured on), sizes [B, T]
//           (how many original tokens each one stands for; absent: all 1)
//   outputs: y [B, T - r', D], sizes [B, T - r'], log_sizes [B, 1, 1, T - r'] (added to the next
//            block's attention scores, so a merged token weighs as the tokens it stands for)
//   attributes: r (tokens to remove), protect_first (1: token 0, the class token, never merges)
// Tokens alternate between set A (even positions) and B (odd). Each A token's most similar B
// token (cosine of the metric) is its match; the r A tokens with the most similar matches merge
// into them, as the size-weighted mean of features. The rest keep their order, so r = 0 changes
// nothing. r' is r capped by the A tokens that may merge.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/parallel.h"
#include "kernels/cpu/common/registry.h"

namespace mminfer::kernels {

namespace {

// Dot products of row x with rows y[0..Q), each in two 8-lane chains, so that 2 x Q chains
// of multiply-adds run at once rather than one chain of dependent adds. (The similarity matrix
// is a few dozen rows square: a GEMM library call cost more in threading than its arithmetic.)
template <int Q>
void dots(const float* x, const float* const* y, int64_t c, float* out) {
  __m256 acc[Q][2];
  for (int q = 0; q < Q; ++q) acc[q][0] = acc[q][1] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= c; k += 16) {
    const __m256 x0 = _mm256_loadu_ps(x + k), x1 = _mm256_loadu_ps(x + k + 8);
    for (int q = 0; q < Q; ++q) {
      acc[q][0] = _mm256_fmadd_ps(x0, _mm256_loadu_ps(y[q] + k), acc[q][0]);
      acc[q][1] = _mm256_fmadd_ps(x1, _mm256_loadu_ps(y[q] + k + 8), acc[q][1]);
    }
  }
  for (int q = 0; q < Q; ++q) {
    alignas(32) float lane[8];
    _mm256_store_ps(lane, _mm256_add_ps(acc[q][0], acc[q][1]));
    float sum = ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
    for (int64_t e = k; e < c; ++e) sum += x[e] * y[q][e];
    out[q] = sum;
  }
}

// 1 / |row|, or 0 for a zero row.
float inverse_norm(const float* row, int64_t c) {
  float n;
  dots<1>(row, &row, c, &n);
  return n > 0 ? 1.f / std::sqrt(n) : 0.f;
}

class TokenMergeKernel final : public Kernel {
 public:
  explicit TokenMergeKernel(const KernelSpec& s)
      : r_(s.a().get_int("r", 0)), protect_first_(s.a().get_int("protect_first", 1) != 0) {
    if (r_ < 0) fail("TokenMerge " + s.name + ": r must be >= 0, got " + std::to_string(r_));
  }

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "x");
    const Tensor& m = need_input(in, 1, "metric");
    if (x.rank() != 3 || m.rank() != 3 || m.dim(0) != x.dim(0) || m.dim(1) != x.dim(1))
      fail("TokenMerge: x " + shape_str(x.shape()) + " and metric " + shape_str(m.shape()) +
           " must be [B, T, D] and [B, T, C]");
    if (const Tensor* s = sizes(in); s && (s->rank() != 2 || s->dim(0) != x.dim(0) || s->dim(1) != x.dim(1)))
      fail("TokenMerge: sizes " + shape_str(s->shape()) + " must be [B, T] for x " + shape_str(x.shape()));
    const int64_t b = x.dim(0), t = x.dim(1) - merged(x.dim(1));
    out[0] = {DType::kFloat32, {b, t, x.dim(2)}};
    out[1] = {DType::kFloat32, {b, t}};
    out[2] = {DType::kFloat32, {b, 1, 1, t}};
  }

  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    const int64_t batch = x.dim(0), t = x.dim(1), d = x.dim(2), c = in[1]->dim(2), r = merged(t);
    const float* xs = x.data<float>();
    const float* ms = in[1]->data<float>();
    const Tensor* size_in = sizes(in);
    parallel_each(batch, [&](int64_t b) {
      const float* xb = xs + b * t * d;
      const float* mb = ms + b * t * c;
      std::vector<float> size(static_cast<size_t>(t), 1.f);
      if (size_in) std::copy_n(size_in->data<float>() + b * t, t, size.begin());
      // Cosine similarity: the rows' dot products over their norms (no normalized copy, which
      // for a ViT's width cost more in fresh memory than the products themselves).
      std::vector<float> inv_norm(static_cast<size_t>(t));
      for (int64_t i = 0; i < t; ++i) inv_norm[i] = inverse_norm(mb + i * c, c);
      // Each mergeable A token's best B match.
      std::vector<int64_t> a_tokens, b_tokens;
      for (int64_t i = protect_first_ ? 2 : 0; i < t; i += 2) a_tokens.push_back(i);
      for (int64_t j = 1; j < t; j += 2) b_tokens.push_back(j);
      std::vector<float> score(a_tokens.size(), -INFINITY);
      std::vector<int64_t> match(a_tokens.size(), -1);
      for (size_t i = 0; i < a_tokens.size(); ++i) {
        const float* ma = mb + a_tokens[i] * c;
        for (size_t j0 = 0; j0 < b_tokens.size(); j0 += 4) {
          const int q = static_cast<int>(std::min<size_t>(4, b_tokens.size() - j0));
          const float* rows[4];
          float dot[4];
          for (int p = 0; p < q; ++p) rows[p] = mb + b_tokens[j0 + p] * c;
          if (q == 4) dots<4>(ma, rows, c, dot);
          else for (int p = 0; p < q; ++p) dots<1>(ma, &rows[p], c, &dot[p]);
          for (int p = 0; p < q; ++p) {
            const float sim = dot[p] * inv_norm[a_tokens[i]] * inv_norm[b_tokens[j0 + p]];
            if (sim > score[i]) score[i] = sim, match[i] = b_tokens[j0 + p];
          }
        }
      }
      std::vector<size_t> order(a_tokens.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](size_t p, size_t q) { return score[p] > score[q]; });
      // Which A tokens go into which B token; the B token's row is then their size-weighted mean.
      std::vector<int64_t> into(static_cast<size_t>(t), -1);
      for (int64_t k = 0; k < r; ++k) into[a_tokens[order[k]]] = match[order[k]];
      std::vector<float> weight(size);
      std::vector<bool> receives(static_cast<size_t>(t), false);
      for (int64_t i = 0; i < t; ++i)
        if (into[i] >= 0) weight[into[i]] += size[i], receives[into[i]] = true;
      float* y = out[0]->data<float>() + b * (t - r) * d;
      float* so = out[1]->data<float>() + b * (t - r);
      float* lo = out[2]->data<float>() + b * (t - r);
      std::vector<int64_t> row(static_cast<size_t>(t), -1);  // each kept token's output row
      int64_t w = 0;
      for (int64_t i = 0; i < t; ++i) {
        if (into[i] >= 0) continue;
        row[i] = w;
        float* yw = y + w * d;
        const float* xi = xb + i * d;
        if (receives[i]) {
          const float f = size[i] / weight[i];
          for (int64_t e = 0; e < d; ++e) yw[e] = f * xi[e];
        } else {
          std::copy_n(xi, d, yw);
        }
        so[w] = weight[i];
        lo[w] = std::log(weight[i]);
        ++w;
      }
      for (int64_t i = 0; i < t; ++i) {
        if (into[i] < 0) continue;
        const int64_t j = into[i];
        const float f = size[i] / weight[j];
        float* yw = y + row[j] * d;
        const float* xi = xb + i * d;
        for (int64_t e = 0; e < d; ++e) yw[e] += f * xi[e];
      }
    });
  }

 private:
  static const Tensor* sizes(const Inputs& in) { return in.size() > 2 && in[2] && in[2]->defined() ? in[2] : nullptr; }
  // The A tokens that may merge: even positions, less the protected first one.
  int64_t merged(int64_t t) const {
    const int64_t a = (t + 1) / 2 - (protect_first_ && t > 0 ? 1 : 0);
    return t < 2 ? 0 : std::clamp<int64_t>(r_, 0, std::max<int64_t>(a, 0));
  }

  int64_t r_;
  bool protect_first_;
};

}  // namespace

void register_token_merge(Registry& r) {
  r.add({"TokenMerge", "mminfer", 1, 1000, 0, {DType::kFloat32},
         [](const KernelSpec& s) { return std::make_unique<TokenMergeKernel>(s); }},
        kNotFoldable);
}

}  // namespace mminfer::kernels
