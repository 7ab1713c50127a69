#include "ir/modality.h"

#include <algorithm>
#include <cctype>

namespace mminfer::ir {

std::optional<Modality> input_modality(const std::string& name) {
  std::string n;
  for (char c : name) n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto has = [&](std::initializer_list<const char*> words) {
    return std::any_of(words.begin(), words.end(), [&](const char* w) { return n.find(w) != std::string::npos; });
  };
  if (has({"pixel", "image", "img", "vision"})) return Modality::kVision;
  if (has({"input_ids", "token", "text", "caption"})) return Modality::kText;
  if (has({"input_features", "input_values", "audio", "speech", "wave", "mel"})) return Modality::kAudio;
  return std::nullopt;
}

std::vector<ModalitySet> node_modalities(const Graph& g) {
  std::vector<ModalitySet> value_set(g.values.size(), 0), node_set(g.nodes.size(), 0);
  for (int v : g.inputs)
    if (auto m = input_modality(g.values[v].name)) value_set[v] = modality_bit(*m);
  for (int n : g.topological_order()) {
    ModalitySet s = 0;
    for (int in : g.nodes[n].inputs)
      if (in >= 0) s |= value_set[in];
    node_set[n] = s;
    for (int out : g.nodes[n].outputs)
      if (out >= 0) value_set[out] = s;
  }
  return node_set;
}

std::optional<Modality> single_modality(ModalitySet s) {
  if (s == 0) return Modality::kOther;
  if (s & (s - 1)) return std::nullopt;
  for (int m = 0; m < kNumModalities; ++m)
    if (s == modality_bit(static_cast<Modality>(m))) return static_cast<Modality>(m);
  return std::nullopt;
}

}  // namespace mminfer::ir
