// Schemas for the ONNX Runtime ops that mminfer runs but the official onnx library does not know
// (SimplifiedLayerNormalization in the default domain; com.microsoft Skip(Simplified)LayerNormalization
// and RotaryEmbedding), so the checker verifies their nodes and shape inference carries types and
// shapes through them to the rest of the graph.
#pragma once

namespace mminfer::onnx_io {

// Registers the schemas in onnx's global registry once; later calls do nothing.
void register_contrib_schemas();

}  // namespace mminfer::onnx_io
