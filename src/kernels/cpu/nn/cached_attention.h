// Attention of query rows over a key/value cache whose rows are contiguous ([T, d], BNSH layout):
// the math under com.microsoft GroupQueryAttention and MultiHeadAttention and mminfer's
// CachedAttention. Each query row sees its own key range [lo, hi) (causal cut, sliding window,
// valid cache length). A decode step is one pass over K and one over V for every group of up to
// four rows that share their keys (the query heads of one KV head).
#pragma once
#include <cstdint>

namespace mminfer::kernels::cached_attention {

struct Rows {
  const float* q;          // [sq, d], rows q_stride apart
  const float* k;          // [t, d], rows kv_stride apart
  const float* v;          // [t, dv], rows kv_stride_v apart
  float* out;              // [sq, dv], rows out_stride apart
  const int64_t* lo;       // per query row: first visible key
  const int64_t* hi;       // per query row: one past the last visible key
  const float* bias;       // additive [sq, t] (rows bias_stride apart), or null
  int64_t sq, d, dv;
  int64_t q_stride, kv_stride, kv_stride_v, out_stride, bias_stride;
  float scale;
  float softcap;           // > 0: score = softcap * tanh(score / softcap), after scale
  bool has_sink;           // the softmax denominator gains exp(sink) (smooth softmax: sink 0)
  float sink;
  // An INT8 cache (core/int8_rows.h) in place of k and v, both or neither: rows of d (dv) codes
  // and their scale, kv_stride (kv_stride_v) bytes apart.
  const int8_t* k8;
  const int8_t* v8;
  const float* sinks;  // per row, in place of `sink` when not null (rows of different heads)
  // A paged cache in place of k and v (or k8 and v8): key j is row j % block of the run that
  // starts at k_blocks[j / block] (value j: v_blocks), rows kv_stride (kv_stride_v) apart, int8
  // rows when blocks_int8.
  const void* const* k_blocks;
  const void* const* v_blocks;
  int64_t block;
  bool blocks_int8;
};

// Consecutive rows with the same key range run together, up to kGroupRows at a time
// (cached_attention_loops.h), so callers pass the rows that share keys as one Rows.
constexpr int kGroupRows = 4;
// scratch: at least scratch_floats(t) floats (t: the largest hi). A row that sees no key gets zeros.
void run(const Rows& p, float* scratch);
int64_t scratch_floats(int64_t t);
// The plain twin, for tests.
void run_reference(const Rows& p);

// Rotates x[0, rotary_dim) in place by position `pos`: cos/sin rows hold rotary_dim / 2 values.
// Interleaved pairs are (2i, 2i+1); otherwise (i, i + rotary_dim / 2).
void rotate(float* x, int64_t rotary_dim, const float* cos_row, const float* sin_row, bool interleaved);

}  // namespace mminfer::kernels::cached_attention
