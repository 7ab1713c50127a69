// A decoder exported with past/present pairs (Optimum's `past_key_values.{i}.*` in,
// `present.{i}.*` out, joined by Concat on the sequence axis) is rewritten so that the runtime
// owns its KV cache: each attention block becomes one mminfer::CachedAttention node that writes
// the step's new keys and values into the past inputs in place (now buffers of a fixed
// capacity) and reads them up to each sequence's valid length. The present outputs, the Concat
// copies and the mask arithmetic disappear, and every step of a decode has the same input shapes,
// so one plan serves them all.
//
// GroupQueryAttention nodes whose past inputs are graph inputs are bound the same way (see
// KvCacheBinding::kSeqlensInput).
//
// The fused node applies causal masking over all cached positions: the mask the graph built
// (causal and attention_mask) is replaced by it, which is exact when no cached position is
// padding. The decoding loop keeps it so by prefilling each sequence on its own.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace mminfer::passes {

struct KvCachePair {
  std::string past_key, past_value;  // graph inputs, now pools of cache blocks (kBlockTableInput)
};

// A Shape(past) the graph read (Whisper's positions come from the past length): it became a graph
// input `input` that the loop feeds with the past's logical shape, elements [start, end).
struct PastShapeFeed {
  std::string input;
  std::string past;
  int64_t start = 0, end = 4;
};

struct KvCacheBinding {
  std::vector<KvCachePair> pairs;  // in the order of the graph's past inputs
  std::vector<PastShapeFeed> shape_feeds;
  // int64 [batch]: each sequence's cached length before this step.
  static constexpr const char* kLengthsInput = "mminfer::cache_lengths";
  // com.microsoft GroupQueryAttention decoders (onnxruntime-genai's form) keep their op, told to
  // write into the past in place; its seqlens_k (int32 [batch], total length - 1) and
  // total_sequence_length (int32 scalar) become inputs the loop feeds instead of the mask.
  static constexpr const char* kSeqlensInput = "mminfer::seqlens_k";
  static constexpr const char* kTotalInput = "mminfer::total_sequence_length";
  // int32 [batch, W]: the cache blocks of each sequence in order. The past inputs the loop feeds
  // are pools of blocks [blocks, kv_heads, block, head_dim] (a row per sequence is the case of
  // one block of the whole capacity each), and position p of sequence b is row p % block of
  // block table[b][p / block].
  static constexpr const char* kBlockTableInput = "mminfer::block_table";
};

// Rewrites `g` and returns the binding, or leaves `g` untouched and returns nullopt with the
// reason in *why when some past input is not consumed in the recognised form. `cache_dtype`
// (float32, float16 or int8) becomes the past inputs' dtype: the caches the loop will feed (an
// int8 past's last axis becomes head_dim + 4: each row's codes and scale, core/int8_rows.h).
std::optional<KvCacheBinding> bind_kv_cache(ir::Graph& g, std::string* why, DType cache_dtype = DType::kFloat32);

}  // namespace mminfer::passes
