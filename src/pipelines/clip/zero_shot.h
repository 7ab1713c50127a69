// Zero-shot classification as CLIP does it: each label becomes prompts through templates
// ("a photo of a {}."), a label's embedding is the renormalized mean of its prompts' unit
// embeddings, and the scores are softmax(logit_scale * cosine(image, label)) over the labels.
#pragma once
#include <span>
#include <string>
#include <vector>

#include "pipelines/embedder.h"

namespace mminfer::clip {

struct LabelScore {
  std::string label;
  float score = 0;  // probability; the scores of one image sum to 1
};

// Every "{}" of `tmpl` replaced by `label`; throws Error when `tmpl` has none (all labels
// would then share one embedding).
std::string fill_template(const std::string& tmpl, const std::string& label);
// Labels x templates prompts, label-major: label 0 with every template, then label 1 ...
// Throws Error on no labels, an empty label or no templates.
std::vector<std::string> prompts(const std::vector<std::string>& labels, const std::vector<std::string>& templates);
// The unit mean of `unit_vectors` (all the same length, at least one).
pipelines::Embedding mean_direction(std::span<const pipelines::Embedding> unit_vectors);
// Scores for one unit image embedding against unit label embeddings, highest first (ties keep
// the labels' order).
std::vector<LabelScore> zero_shot_scores(std::span<const float> image, const std::vector<std::string>& labels,
                                         std::span<const pipelines::Embedding> label_embeddings, float logit_scale);
// The entropy of label probabilities, in nats: 0 when one label takes all, log(n) when all tie.
double entropy(std::span<const LabelScore> scores);

}  // namespace mminfer::clip
