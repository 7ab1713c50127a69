// OpenAI's `dimensions` on /v1/embeddings: shorter embeddings, honoured only for models trained
// so that the first n values of an embedding are themselves an embedding (Matryoshka
// representation learning). A pipeline folder says so in its pipeline.json:
//   "matryoshka_dimensions": [64, 128, 256, 512]
// Cutting any other model's vector would give something that merely looks like an embedding,
// so there `dimensions` is refused unless it is the full size.
#pragma once
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mminfer::serve {

// The manifest's matryoshka_dimensions (empty when absent). Throws Error "<path>: ..." unless it
// is a list of distinct whole numbers from 1 to `full` (when `full` is known, > 0).
std::vector<size_t> matryoshka_dimensions(const nlohmann::json& manifest, const std::string& path, size_t full);

// The request's `dimensions`, 0 when absent or null. Throws RequestError (400, param
// "dimensions") for a value that is not a whole number, is below 1 or above `full` (when known),
// or that model `model` was not trained for (`trained`: its matryoshka_dimensions).
size_t requested_dimensions(const nlohmann::json& request, const std::string& model, size_t full,
                            const std::vector<size_t>& trained);

// The first n values, scaled back to unit length.
std::vector<float> shorten_embedding(std::span<const float> embedding, size_t n);

}  // namespace mminfer::serve
