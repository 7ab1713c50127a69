// Optimum's merged decoders (decoder_model_merged.onnx) hold the first-step and the with-past
// graphs as the two branches of an If on the boolean input `use_cache_branch`. Fixing that input
// to one value replaces each If it steers by the nodes of the branch it selects, so the decoder is
// an ordinary graph again (and its past inputs can be bound to the runtime's cache).
#pragma once
#include <string>

#include "ir/graph.h"

namespace mminfer::passes {

// Inlines every If whose condition is graph input `input`, taking the branch `value` selects,
// and removes the graph inputs nothing reads any more (the condition, and what only the other
// branch read). Returns false (and changes nothing) when there is no such input.
bool fix_branch_input(ir::Graph& g, const std::string& input, bool value);

}  // namespace mminfer::passes
