#include "pipelines/clip/zero_shot.h"

#include <algorithm>
#include <cmath>

#include "core/one_line.h"

namespace mminfer::clip {

std::string fill_template(const std::string& tmpl, const std::string& label) {
  std::string out;
  size_t from = 0, at;
  while ((at = tmpl.find("{}", from)) != std::string::npos) {
    out.append(tmpl, from, at - from).append(label);
    from = at + 2;
  }
  if (from == 0) throw Error("template '" + one_line(tmpl) + "' has no {} for the label");
  return out.append(tmpl, from);
}

std::vector<std::string> prompts(const std::vector<std::string>& labels, const std::vector<std::string>& templates) {
  if (labels.empty()) throw Error("no labels to classify with");
  if (templates.empty()) throw Error("no prompt templates");
  std::vector<std::string> out;
  out.reserve(labels.size() * templates.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i].empty()) throw Error("label " + std::to_string(i + 1) + " is empty");
    for (const std::string& t : templates) out.push_back(fill_template(t, labels[i]));
  }
  return out;
}

pipelines::Embedding mean_direction(std::span<const pipelines::Embedding> unit_vectors) {
  if (unit_vectors.empty()) throw Error("mean_direction of no vectors");
  std::vector<double> sum(unit_vectors[0].size(), 0.0);
  for (const pipelines::Embedding& v : unit_vectors) {
    if (v.size() != sum.size()) throw Error("embeddings of different lengths");
    for (size_t i = 0; i < v.size(); ++i) sum[i] += v[i];
  }
  pipelines::Embedding mean(sum.size());
  for (size_t i = 0; i < sum.size(); ++i) mean[i] = static_cast<float>(sum[i] / unit_vectors.size());
  pipelines::l2_normalize(mean);
  return mean;
}

std::vector<LabelScore> zero_shot_scores(std::span<const float> image, const std::vector<std::string>& labels,
                                         std::span<const pipelines::Embedding> label_embeddings, float logit_scale) {
  if (labels.size() != label_embeddings.size()) throw Error("labels and label embeddings differ in number");
  std::vector<double> logits(labels.size());
  for (size_t l = 0; l < labels.size(); ++l) {
    if (label_embeddings[l].size() != image.size())
      throw Error("the image embedding has " + std::to_string(image.size()) + " values, the text embedding " +
                  std::to_string(label_embeddings[l].size()));
    double dot = 0;
    for (size_t i = 0; i < image.size(); ++i) dot += static_cast<double>(image[i]) * label_embeddings[l][i];
    logits[l] = logit_scale * dot;
  }
  const double top = *std::max_element(logits.begin(), logits.end());
  double total = 0;
  for (double& z : logits) total += (z = std::exp(z - top));
  std::vector<LabelScore> scores;
  for (size_t l = 0; l < labels.size(); ++l) scores.push_back({labels[l], static_cast<float>(logits[l] / total)});
  std::stable_sort(scores.begin(), scores.end(), [](const LabelScore& a, const LabelScore& b) { return a.score > b.score; });
  return scores;
}

double entropy(std::span<const LabelScore> scores) {
  double h = 0;
  for (const LabelScore& s : scores)
    if (s.score > 0) h -= s.score * std::log(static_cast<double>(s.score));
  return h;
}

}  // namespace mminfer::clip
