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
#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/parallel.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/gemm/dense_gemm.h"

namespace mminfer::kernels {

namespace {

// 1 / |row|, or 0 for a zero row. Sixteen partial sums, so the loop runs in vector lanes rather
// than as one chain of dependent adds (which made the norms most of this op's time).
float inverse_norm(const float* row, int64_t c) {
  constexpr int64_t kLanes = 16;
  float part[kLanes] = {};
  int64_t k = 0;
  for (; k + kLanes <= c; k += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) part[l] += row[k + l] * row[k + l];
  float n = 0;
  for (float p : part) n += p;
  for (; k < c; ++k) n += row[k] * row[k];
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
      // Cosine similarity needs unit rows.
      std::vector<float> unit(static_cast<size_t>(t * c));
      for (int64_t i = 0; i < t; ++i) {
        const float inv = inverse_norm(mb + i * c, c);
        for (int64_t k = 0; k < c; ++k) unit[i * c + k] = mb[i * c + k] * inv;
      }
      // Each mergeable A token's best B match: one product of the A rows by the B rows.
      std::vector<int64_t> a_tokens, b_tokens, match;
      for (int64_t i = protect_first_ ? 2 : 0; i < t; i += 2) a_tokens.push_back(i);
      for (int64_t j = 1; j < t; j += 2) b_tokens.push_back(j);
      const int64_t na = static_cast<int64_t>(a_tokens.size()), nb = static_cast<int64_t>(b_tokens.size());
      std::vector<float> ua(static_cast<size_t>(na * c)), ub(static_cast<size_t>(nb * c)), sim(static_cast<size_t>(na * nb));
      for (int64_t i = 0; i < na; ++i) std::copy_n(&unit[a_tokens[i] * c], c, &ua[i * c]);
      for (int64_t j = 0; j < nb; ++j) std::copy_n(&unit[b_tokens[j] * c], c, &ub[j * c]);
      if (na > 0 && nb > 0) sgemm(false, true, na, nb, c, 1.f, ua.data(), c, ub.data(), c, 0.f, sim.data(), nb);
      std::vector<float> score(static_cast<size_t>(na), -INFINITY);
      match.assign(static_cast<size_t>(na), -1);
      for (int64_t i = 0; i < na; ++i)
        for (int64_t j = 0; j < nb; ++j)
          if (sim[i * nb + j] > score[i]) score[i] = sim[i * nb + j], match[i] = b_tokens[j];
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
