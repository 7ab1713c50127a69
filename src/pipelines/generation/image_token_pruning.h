// Fewer image tokens for a vision-language decoder: each image feature row is scored by its
// relevance to the prompt's text (the cosine between the row and the mean embedding of the
// prompt's other tokens), and only the most relevant share goes to the decoder, in their
// original order; the dropped rows' image-token positions leave the prompt, so prefill reads
// fewer positions and every later step attends over fewer.
#pragma once
#include <cstddef>
#include <vector>

#include "generate/token.h"
#include "mminfer/tensor.h"

namespace mminfer::pipelines {

struct PrunedImageTokens {
  std::vector<generate::TokenId> prompt;  // the image tokens of dropped rows removed
  Tensor features;                        // [1, kept, width]
  std::vector<size_t> rows;               // the feature rows kept, in order
  std::vector<size_t> positions;          // the prompt positions kept (the pruned prompt's source)
  size_t kept = 0, total = 0;
};

// `prompt_embeds` [1, positions, width] embeds `prompt`; `features` [1, N, width] are the rows
// of its N image tokens, in order. Keeps ceil((1 - share_removed) * N) rows, at least one, the
// highest scores first (ties: the earlier row). share_removed is in [0, 1). Throws Error when
// the shapes disagree with the prompt.
PrunedImageTokens prune_image_tokens(const std::vector<generate::TokenId>& prompt, generate::TokenId image_token,
                                     const Tensor& prompt_embeds, const Tensor& features, double share_removed);

}  // namespace mminfer::pipelines
