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
#include "kernels/cpu/nn/row_dots.h"

namespace mminfer::kernels {

namespace {

// 1 / |row| of each of one image's t metric rows (c floats each), or 0 for a zero row.
void inverse_norms(const float* m, int64_t c, int64_t t, float* inv) {
  for (int64_t row = 0; row < t; ++row) {
    float n;
    row_dots(m, c, &row, 1, &row, 1, &n);
    inv[row] = n > 0 ? 1.f / std::sqrt(n) : 0.f;
  }
}

// Work below which the similarity rows stay on one thread (multiply-adds), and floats below which
// the output rows do. One image of a ViT-B (24 x 25 rows of 768, 50 rows out) stays on one: at
// that size forking costs more than it saves.
constexpr int64_t kSimilarityGrain = 1 << 20;
constexpr int64_t kRowsGrain = 1 << 16;

// A tokens a[0..na) of one image against its B tokens: each one's most similar B token (the
// cosine of the metric rows m, c floats each, whose inverse norms are `inv`) and that cosine. The
// first of equal ones wins; a token with no comparable cosine (NaN metric) keeps the first B
// token and -inf, so that exactly r tokens still merge.
void best_matches(const float* m, int64_t c, const float* inv, const int64_t* a, int64_t na, const int64_t* b,
                  int64_t nb, std::vector<float>& dots, float* score, int64_t* match) {
  // Cosine similarity: the rows' dot products over their norms (no normalized copy, which for
  // a ViT's width cost more in fresh memory than the products themselves).
  dots.resize(static_cast<size_t>(na * nb));
  row_dots(m, c, a, na, b, nb, dots.data());
  for (int64_t i = 0; i < na; ++i) {
    const float inv_a = inv[a[i]];
    float best = -INFINITY;
    int64_t at = b[0];
    for (int64_t j = 0; j < nb; ++j) {
      const float sim = dots[i * nb + j] * inv_a * inv[b[j]];
      if (sim > best) best = sim, at = b[j];
    }
    score[i] = best, match[i] = at;
  }
}

// Where each token's row goes, per image (index b * T + token): `into` the B token it merges into
// (-1: kept), `dest` its output row, `share` the factor its features weigh with in that row
// (its size over the row's total), `weight` a kept token's total size, `receives` whether a
// kept token takes others in (else its row is copied as it is).
struct Plan {
  std::vector<int64_t> into, dest;
  std::vector<float> share, weight;
  std::vector<char> receives;
};

Plan empty_plan(int64_t batch, int64_t t) {
  const size_t n = static_cast<size_t>(batch * t);
  return {std::vector<int64_t>(n, -1), std::vector<int64_t>(n, -1), std::vector<float>(n), std::vector<float>(n, 1.f),
          std::vector<char>(n, 0)};
}

// Image b's part of the plan from its A tokens' scores and matches: the r A tokens with the most
// similar matches merge (ties: the earlier A token first). Images touch disjoint parts.
void plan_image(Plan& p, int64_t b, int64_t t, int64_t r, const std::vector<int64_t>& a_tokens, const float* score,
                const int64_t* match, const Tensor* sizes) {
  const int64_t o = b * t;
  if (r > 0) {  // with r = 0 no scores were computed, and none is needed
    std::vector<size_t> order(a_tokens.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t i, size_t j) { return score[i] > score[j]; });
    for (int64_t k = 0; k < r; ++k) p.into[o + a_tokens[order[k]]] = match[order[k]];
  }
  std::vector<float> size(static_cast<size_t>(t), 1.f);
  if (sizes) std::copy_n(sizes->data<float>() + o, t, size.begin());
  std::copy(size.begin(), size.end(), p.weight.begin() + o);
  for (int64_t i = 0; i < t; ++i)
    if (const int64_t j = p.into[o + i]; j >= 0) p.weight[o + j] += size[i], p.receives[o + j] = 1;
  int64_t w = 0;
  for (int64_t i = 0; i < t; ++i)
    if (p.into[o + i] < 0) p.dest[o + i] = w++, p.share[o + i] = size[i] / p.weight[o + i];
  for (int64_t i = 0; i < t; ++i)
    if (const int64_t j = p.into[o + i]; j >= 0) p.dest[o + i] = p.dest[o + j], p.share[o + i] = size[i] / p.weight[o + j];
}

// Columns [e0, e1) of image b's output rows: each kept token's row (scaled by its share where
// others merge into it), then each merged token's share added, in token order.
void write_rows(const Plan& p, int64_t b, int64_t t, int64_t d, int64_t e0, int64_t e1, const float* x, float* y) {
  const int64_t o = b * t;
  for (int64_t i = 0; i < t; ++i) {
    if (p.into[o + i] >= 0) continue;
    const float* xi = x + i * d;
    float* yw = y + p.dest[o + i] * d;
    if (!p.receives[o + i]) {
      std::copy(xi + e0, xi + e1, yw + e0);
      continue;
    }
    const float f = p.share[o + i];
    for (int64_t e = e0; e < e1; ++e) yw[e] = f * xi[e];
  }
  for (int64_t i = 0; i < t; ++i) {
    if (p.into[o + i] < 0) continue;
    const float* xi = x + i * d;
    float* yw = y + p.dest[o + i] * d;
    const float f = p.share[o + i];
    for (int64_t e = e0; e < e1; ++e) yw[e] += f * xi[e];
  }
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
    const float* ms = in[1]->data<float>();
    // The mergeable A tokens and the B tokens, the same for every image.
    std::vector<int64_t> a_tokens, b_tokens;
    for (int64_t i = protect_first_ ? 2 : 0; i < t; i += 2) a_tokens.push_back(i);
    for (int64_t j = 1; j < t; j += 2) b_tokens.push_back(j);
    const int64_t na = static_cast<int64_t>(a_tokens.size()), nb = static_cast<int64_t>(b_tokens.size());
    // Each A token's best match, then where every token's row goes, then its row itself.
    std::vector<float> score(static_cast<size_t>(batch * na));
    std::vector<int64_t> match(static_cast<size_t>(batch * na));
    Plan plan = empty_plan(batch, t);
    const float* xs = x.data<float>();
    float* ys = out[0]->data<float>();
    if (batch >= num_threads()) {
      // Enough images for every thread: each image whole on one, in one parallel region.
      parallel_each(batch, [&](int64_t b) {
        std::vector<float> dots, inv(static_cast<size_t>(t));
        if (r > 0) {
          inverse_norms(ms + b * t * c, c, t, inv.data());
          best_matches(ms + b * t * c, c, inv.data(), a_tokens.data(), na, b_tokens.data(), nb, dots,
                       score.data() + b * na, match.data() + b * na);
        }
        plan_image(plan, b, t, r, a_tokens, score.data() + b * na, match.data() + b * na, sizes(in));
        write_rows(plan, b, t, d, 0, d, xs + b * t * d, ys + b * (t - r) * d);
      });
    } else {
      // Fewer images than threads: the similarity rows and the output's column blocks are split
      // instead, so that a large image alone still uses every thread.
      // Each row's inverse norm once (a few of the similarity's multiply-adds), then the rows.
      std::vector<float> inv(static_cast<size_t>(r > 0 ? batch * t : 0));
      for (int64_t b = 0; r > 0 && b < batch; ++b) inverse_norms(ms + b * t * c, c, t, inv.data() + b * t);
      const int64_t grain = std::max<int64_t>(1, kSimilarityGrain / std::max<int64_t>(1, nb * c));
      if (r > 0) parallel_for(batch * na, grain, [&](int64_t begin, int64_t end) {
        std::vector<float> dots;
        for (int64_t row = begin; row < end;) {
          const int64_t b = row / na, i = row % na, rows = std::min(end - row, na - i);
          best_matches(ms + b * t * c, c, inv.data() + b * t, a_tokens.data() + i, rows, b_tokens.data(), nb, dots,
                       score.data() + row, match.data() + row);
          row += rows;
        }
      });
      for (int64_t b = 0; b < batch; ++b)
        plan_image(plan, b, t, r, a_tokens, score.data() + b * na, match.data() + b * na, sizes(in));
      const int64_t blocks = (d + 15) / 16;
      parallel_for(batch * blocks, std::max<int64_t>(1, kRowsGrain / (16 * t)), [&](int64_t begin, int64_t end) {
        for (int64_t u = begin; u < end;) {
          const int64_t b = u / blocks, first = u % blocks, last = std::min(blocks, first + (end - u));
          write_rows(plan, b, t, d, first * 16, std::min(d, last * 16), xs + b * t * d, ys + b * (t - r) * d);
          u += last - first;
        }
      });
    }
    for (int64_t b = 0; b < batch; ++b) {
      float* so = out[1]->data<float>() + b * (t - r);
      float* lo = out[2]->data<float>() + b * (t - r);
      for (int64_t i = 0; i < t; ++i) {
        const int64_t k = b * t + i;
        if (plan.into[k] >= 0) continue;
        so[plan.dest[k]] = plan.weight[k];
        lo[plan.dest[k]] = std::log(plan.weight[k]);
      }
    }
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
