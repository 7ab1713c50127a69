#include "serve/embedding_dimensions.h"

#include <algorithm>
#include <cmath>

#include "serve/openai_error.h"

namespace mminfer::serve {

namespace {

// A JSON integer as a count: -1 for one below 1 (signed or unsigned JSON alike), or the value.
int64_t positive_or_minus_one(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    return u == 0 ? -1 : static_cast<int64_t>(std::min<uint64_t>(u, uint64_t{1} << 62));
  }
  int64_t i = v.get<int64_t>();
  return i < 1 ? -1 : i;
}

std::string list_of(const std::vector<size_t>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i)
    out += (i == 0 ? "" : i + 1 == values.size() ? " or " : ", ") + std::to_string(values[i]);
  return out;
}

}  // namespace

std::vector<size_t> matryoshka_dimensions(const nlohmann::json& manifest, const std::string& path, size_t full) {
  std::vector<size_t> out;
  if (!manifest.is_object() || !manifest.contains("matryoshka_dimensions")) return out;
  const nlohmann::json& v = manifest["matryoshka_dimensions"];
  const std::string where = path + ": matryoshka_dimensions";
  if (!v.is_array() || v.empty()) throw Error(where + " must be a non-empty list of whole numbers");
  for (const nlohmann::json& d : v) {
    if (!d.is_number_integer() || positive_or_minus_one(d) < 0)
      throw Error(where + " holds " + d.dump() + ", not a whole number from 1");
    size_t n = static_cast<size_t>(positive_or_minus_one(d));
    if (full > 0 && n > full)
      throw Error(where + " holds " + std::to_string(n) + ", more than the model's " + std::to_string(full) + " dimensions");
    if (std::find(out.begin(), out.end(), n) != out.end()) throw Error(where + " holds " + std::to_string(n) + " twice");
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

size_t requested_dimensions(const nlohmann::json& request, const std::string& model, size_t full,
                            const std::vector<size_t>& trained) {
  if (!request.contains("dimensions") || request["dimensions"].is_null()) return 0;
  const nlohmann::json& v = request["dimensions"];
  auto refuse = [](const std::string& why) { throw RequestError(400, why, "dimensions", "invalid_value"); };
  if (!v.is_number_integer()) refuse("'dimensions' must be a whole number, not " + v.dump());
  const int64_t count = positive_or_minus_one(v);
  if (count < 0) refuse("'dimensions' must be at least 1, not " + v.dump());
  if (count > (int64_t{1} << 30)) refuse("'dimensions' of " + v.dump() + " is too large");
  size_t n = static_cast<size_t>(count);
  if (full > 0 && n > full)
    refuse("'dimensions' of " + std::to_string(n) + " is more than the " + std::to_string(full) + " dimensions of model '" +
           model + "'");
  if (n == full) return n;  // the full vector: nothing to cut
  if (trained.empty())
    refuse("model '" + model + "' was not trained for shortened embeddings (its pipeline.json lists no " +
           "matryoshka_dimensions), so 'dimensions' cannot be honoured; leave it out" +
           (full > 0 ? " or ask for " + std::to_string(full) : std::string()));
  if (std::find(trained.begin(), trained.end(), n) == trained.end())
    refuse("model '" + model + "' was trained for dimensions " + list_of(trained) +
           (full > 0 && full != trained.back() ? " (or " + std::to_string(full) + ", the full size)" : std::string()) +
           ", not " + std::to_string(n));
  return n;
}

std::vector<float> shorten_embedding(std::span<const float> embedding, size_t n) {
  std::vector<float> out(embedding.begin(), embedding.begin() + static_cast<std::ptrdiff_t>(std::min(n, embedding.size())));
  double sum = 0;
  for (float x : out) sum += static_cast<double>(x) * x;
  // As torch's F.normalize: x / max(|x|, 1e-12), so a zero prefix stays zero rather than NaN.
  const double norm = std::max(std::sqrt(sum), 1e-12);
  for (float& x : out) x = static_cast<float>(x / norm);
  return out;
}

}  // namespace mminfer::serve
