// The attention and MLP blocks of a transformer as exporters write them into ONNX (torch's
// export of CLIP, ViT, BERT, Whisper encoders): what structured pruning needs to know to remove
// heads and hidden channels from the file itself.
//
// Attention: q, k and v projections (MatMul by a [D, H*dh] weight, an optional bias Add), each
// split into heads by a Reshape to [B, T, H, dh] and Transposes, scores MatMul(q, kᵀ) with
// optional scalar scaling and an additive mask, Softmax, MatMul by v, the heads merged back by a
// Transpose and a Reshape to [B, T, H*dh], and the output projection.
// MLP: MatMul by [D, F] (+ bias), element-wise work with scalar constants only (GELU, QuickGELU,
// ReLU, SiLU...), MatMul by [F, D].
#pragma once
#include <map>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

namespace mminfer::onnx_io {

// One MatMul by a constant [K, N] weight and the Add of its [N] bias, when there is one.
struct Projection {
  int matmul = -1;          // node index in the main graph
  std::string weight;       // initializer behind the MatMul's second input
  int bias_add = -1;        // node index of the Add, or -1
  int bias_slot = -1;       // which input of that Add is the bias
  std::string bias;         // its initializer
  std::string output;       // what the projection's last node writes
  int64_t rows = 0, cols = 0;
};

// A place in a Reshape's target shape that holds the head count (split) or the merged width:
// the constant `constant`, element `element`; `reshape` and `slot` say which input reads it
// (the Reshape's own shape input, or one input of the Concat that builds it).
struct ShapeElement {
  int node = -1;            // the node whose input `slot` is the constant
  int slot = -1;
  std::string constant;
  int64_t element = 0;
  int64_t per_head = 1;     // the value is heads * per_head (1 for the head count, dh for the width)
  bool computed = false;    // a one-element piece computed at run time (no `constant`): replaced whole
};

struct AttentionBlock {
  Projection q, k, v, o;
  int64_t heads = 0, head_dim = 0;
  std::string merged;               // the output projection's input: every head's context, [.., H*dh]
  std::vector<ShapeElement> shape;  // what changes with the head count
};

struct MlpBlock {
  Projection up, down;
  std::string hidden;  // the down projection's input, [.., F]
};

struct TransformerBlocks {
  std::vector<AttentionBlock> attention;
  std::vector<MlpBlock> mlp;
  // Every other MatMul by a constant [K, N] weight: cross-attention's projections (their keys and
  // values come from another sequence, which the attention pattern above does not follow),
  // patch and output projections. Low rank may factor them; pruning leaves them whole.
  std::vector<Projection> other;
  // Softmax nodes that looked like attention but could not be followed, and why.
  std::vector<std::string> skipped;
};

// Finds the blocks in the main graph, in graph order.
TransformerBlocks find_transformer_blocks(const onnx::GraphProto& g);

}  // namespace mminfer::onnx_io
