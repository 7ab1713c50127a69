#include "pipelines/generation/image_token_pruning.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "mminfer/status.h"

namespace mminfer::pipelines {

PrunedImageTokens prune_image_tokens(const std::vector<generate::TokenId>& prompt, generate::TokenId image_token,
                                     const Tensor& prompt_embeds, const Tensor& features, double share_removed) {
  if (!(share_removed >= 0 && share_removed < 1)) throw Error("the share of image tokens removed is from 0 to below 1");
  if (prompt_embeds.dtype() != DType::kFloat32 || prompt_embeds.rank() != 3 ||
      prompt_embeds.dim(1) != static_cast<int64_t>(prompt.size()) || features.dtype() != DType::kFloat32 ||
      features.rank() != 3 || features.dim(2) != prompt_embeds.dim(2))
    throw Error("image token pruning: prompt embeddings " + shape_str(prompt_embeds.shape()) + " and image features " +
                shape_str(features.shape()) + " do not fit a " + std::to_string(prompt.size()) + "-token prompt");
  const int64_t width = features.dim(2), n = features.dim(1);
  const size_t images = static_cast<size_t>(std::count(prompt.begin(), prompt.end(), image_token));
  if (static_cast<int64_t>(images) != n)
    throw Error("the prompt holds " + std::to_string(images) + " image tokens for " + std::to_string(n) + " image features");

  // The query: the mean embedding of every token that is not an image token.
  std::vector<double> query(static_cast<size_t>(width), 0.0);
  size_t text = 0;
  for (size_t p = 0; p < prompt.size(); ++p) {
    if (prompt[p] == image_token) continue;
    const float* e = prompt_embeds.data<float>() + static_cast<int64_t>(p) * width;
    for (int64_t d = 0; d < width; ++d) query[d] += e[d];
    ++text;
  }
  double qnorm = 0;
  for (double& q : query) qnorm += q * q;
  qnorm = std::sqrt(qnorm);
  std::vector<double> score(static_cast<size_t>(n), 0.0);
  for (int64_t r = 0; r < n; ++r) {
    const float* f = features.data<float>() + r * width;
    double dot = 0, fnorm = 0;
    for (int64_t d = 0; d < width; ++d) dot += query[d] * f[d], fnorm += static_cast<double>(f[d]) * f[d];
    score[r] = text && qnorm > 0 && fnorm > 0 ? dot / (qnorm * std::sqrt(fnorm)) : 0.0;
  }
  const auto keep = static_cast<size_t>(std::max<double>(1, std::ceil((1 - share_removed) * static_cast<double>(n) - 1e-9)));
  std::vector<size_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return score[a] > score[b]; });
  std::vector<bool> kept(static_cast<size_t>(n), false);
  for (size_t k = 0; k < keep && k < order.size(); ++k) kept[order[k]] = true;

  PrunedImageTokens out;
  out.total = static_cast<size_t>(n);
  out.kept = std::min<size_t>(keep, out.total);
  out.features = Tensor::empty(DType::kFloat32, {1, static_cast<int64_t>(out.kept), width});
  size_t row = 0, written = 0;
  for (size_t p = 0; p < prompt.size(); ++p) {
    const generate::TokenId t = prompt[p];
    if (t != image_token) {
      out.prompt.push_back(t);
      out.positions.push_back(p);
      continue;
    }
    if (kept[row]) {
      out.prompt.push_back(t);
      out.positions.push_back(p);
      out.rows.push_back(row);
      std::memcpy(out.features.data<float>() + written * width, features.data<float>() + row * width, sizeof(float) * width);
      ++written;
    }
    ++row;
  }
  return out;
}

}  // namespace mminfer::pipelines
