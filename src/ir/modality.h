// Which modalities each node works on: a node belongs to the modalities of the graph inputs it
// depends on. Inputs are recognised by name, case-insensitively:
//   vision: names holding "pixel", "image", "img" or "vision"
//   text:   "input_ids", "token", "text" or "caption" (e.g. input_ids, decoder_input_ids,
//           token_type_ids)
//   audio:  "input_features", "input_values", "audio", "speech", "wave" or "mel"
// Others (attention_mask, position_ids, x, ...) carry no modality: nodes reached only from
// them are kOther, and they add nothing to nodes that a recognised input also reaches.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "mminfer/precision.h"

namespace mminfer::ir {

using ModalitySet = uint8_t;  // bit m for Modality m
constexpr ModalitySet modality_bit(Modality m) { return static_cast<ModalitySet>(1u << static_cast<int>(m)); }

std::optional<Modality> input_modality(const std::string& name);

// One set per node (empty for removed nodes and for nodes fed by no recognised input). A set
// with two or more modalities marks a node where branches have joined.
std::vector<ModalitySet> node_modalities(const Graph& g);

// The single modality of a set, kOther for an empty set, nullopt for a joint one.
std::optional<Modality> single_modality(ModalitySet s);

}  // namespace mminfer::ir
