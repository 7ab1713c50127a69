// com.microsoft GroupQueryAttention: causal self-attention with grouped K/V heads and a BNSH
// key/value cache, as onnxruntime-genai's model builder writes it. Inputs:
//   0 query [B, S, N*H] (or packed Q|K|V [B, S, (N + 2*Nkv)*H] when key and value are omitted),
//   1 key, 2 value [B, S, Nkv*H], 3 past_key, 4 past_value [B, Nkv, P, H],
//   5 seqlens_k int32 [B] (each sequence's total length - 1), 6 total_sequence_length int32 scalar,
//   7 cos_cache, 8 sin_cache [max_pos, rotary_dim / 2] (do_rotary), 9 position_ids int64 [B, S],
//   10 attention_bias [B|1, N|1, S, T], 11 head_sink [N].
// Outputs: output [B, S, N*H], present_key, present_value [B, Nkv, max(T, P), H]. When the
// model's past is max-length (P >= T), present has the same shape and may share past's buffer:
// then only the new rows are written. Bound to a runtime-owned cache (mminfer_cache_in_place, set
// by passes/bind_kv_cache), the pasts may also be float16, or int8 rows of codes and a scale
// (core/int8_rows.h: [B, Nkv, P, H + 4]): the new rows are rotated in float, then narrowed or
// quantized as they are written. The binding may add a block table (int32 [B, W], the input that
// mminfer_block_table_input names): the pasts are then pools of blocks [blocks, Nkv, block, H]
// read through it (kv_rows.h), and P = W * block.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "core/int8_rows.h"
#include "core/parallel.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/nn/cached_attention.h"
#include "kernels/cpu/nn/float_io.h"
#include "kernels/cpu/nn/kv_rows.h"

namespace mminfer::kernels {

namespace {

const char* kOp = "GroupQueryAttention: ";

[[noreturn]] void gqa_fail(const std::string& m) { fail(kOp + m); }

struct GqaShape {
  int64_t batch, seq, head, past, present, total;
  bool packed;
  const int32_t* table;  // a runtime-owned cache's block table, or null (contiguous)
  int64_t block, table_width;
};

// Shapes and dtypes from the inputs (one function, so shape inference and run agree).
GqaShape gqa_shape(const Inputs& in, int64_t heads, int64_t kv_heads, bool in_place, int table_input) {
  const Tensor& q = need_input(in, 0, "query");
  if (q.dtype() != DType::kFloat32 && q.dtype() != DType::kFloat16) gqa_fail("query must be float32 or float16");
  if (q.rank() != 3) gqa_fail("query must be [batch, sequence, hidden], got " + shape_str(q.shape()));
  GqaShape s{};
  s.batch = q.dim(0), s.seq = q.dim(1);
  const Tensor* k = in.size() > 1 ? in[1] : nullptr;
  const Tensor* v = in.size() > 2 ? in[2] : nullptr;
  s.packed = k == nullptr;
  if (s.packed != (v == nullptr)) gqa_fail("key and value must be both given or both omitted (packed QKV)");
  int64_t width = s.packed ? heads + 2 * kv_heads : heads;
  if (q.dim(2) % width != 0) gqa_fail("query's hidden size " + std::to_string(q.dim(2)) + " is not a multiple of " + std::to_string(width) + " heads");
  s.head = q.dim(2) / width;
  if (s.head == 0) gqa_fail("head size is 0");
  Shape kv_shape{s.batch, s.seq, kv_heads * s.head};
  for (const Tensor* t : {k, v})
    if (t && (t->dtype() != q.dtype() || t->shape() != kv_shape))
      gqa_fail("key and value must be " + shape_str(kv_shape) + " of query's dtype, got " + shape_str(t->shape()));
  const Tensor* pk = in.size() > 3 ? in[3] : nullptr;
  const Tensor* pv = in.size() > 4 ? in[4] : nullptr;
  if ((pk == nullptr) != (pv == nullptr)) gqa_fail("past_key and past_value must be both given or both omitted");
  if (pk) {
    // A runtime-owned cache may be float32, float16 or int8 rows (whose scale follows the codes).
    const DType t = pk->dtype();
    const bool cache_type = t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kInt8;
    if (in_place ? !cache_type || pv->dtype() != t : pk->dtype() != q.dtype() || pv->dtype() != q.dtype())
      gqa_fail(in_place ? "past_key and past_value must be both float32, float16 or int8" : "past_key and past_value must have query's dtype");
    const int64_t row = t == DType::kInt8 ? int8_rows::bytes(s.head) : s.head;
    const Tensor* table = in_place && table_input >= 0 && in.size() > size_t(table_input) ? in[table_input] : nullptr;
    if (table && (table->dtype() != DType::kInt32 || table->rank() != 2 || table->dim(0) != s.batch || table->dim(1) < 1))
      gqa_fail("the block table must be int32 [" + std::to_string(s.batch) + ", blocks], got " + shape_str(table->shape()));
    if (pk->rank() != 4 || (!table && pk->dim(0) != s.batch) || pk->dim(1) != kv_heads || pk->dim(3) != row || pv->shape() != pk->shape())
      gqa_fail("past_key and past_value must be [" + std::string(table ? "blocks" : std::to_string(s.batch)) + ", " +
               std::to_string(kv_heads) + ", P, " + std::to_string(row) + "], got " + shape_str(pk->shape()) + " and " +
               shape_str(pv->shape()));
    s.block = pk->dim(2), s.table_width = table ? table->dim(1) : 1;
    s.table = table ? table->data<int32_t>() : nullptr;
    s.past = s.block * s.table_width;
  }
  const Tensor& seqlens = need_input(in, 5, "seqlens_k");
  if (seqlens.dtype() != DType::kInt32 || seqlens.numel() != s.batch)
    gqa_fail("seqlens_k must be int32 with one value per batch entry (" + std::to_string(s.batch) + ")");
  const Tensor& total = need_input(in, 6, "total_sequence_length");
  if (total.dtype() != DType::kInt32 || total.numel() != 1) gqa_fail("total_sequence_length must be one int32");
  s.total = total.data<int32_t>()[0];
  if (s.total < s.seq) gqa_fail("total_sequence_length " + std::to_string(s.total) + " is below the query length " + std::to_string(s.seq));
  s.present = std::max(s.total, s.past);
  return s;
}

class GroupQueryAttentionKernel final : public Kernel {
 public:
  explicit GroupQueryAttentionKernel(const KernelSpec& spec) {
    heads_ = spec.a().get_int("num_heads", 0);
    kv_heads_ = spec.a().get_int("kv_num_heads", 0);
    if (heads_ <= 0 || kv_heads_ <= 0) gqa_fail("num_heads and kv_num_heads must be positive");
    if (heads_ % kv_heads_ != 0)
      gqa_fail("num_heads " + std::to_string(heads_) + " is not a multiple of kv_num_heads " + std::to_string(kv_heads_));
    scale_ = spec.a().get_float("scale", 0.f);
    softcap_ = spec.a().get_float("softcap", 0.f);
    window_ = spec.a().get_int("local_window_size", -1);
    causal_ = spec.a().get_int("causal", 1) != 0;
    rotary_ = spec.a().get_int("do_rotary", 0) != 0;
    interleaved_ = spec.a().get_int("rotary_interleaved", 0) != 0;
    smooth_ = spec.a().get_int("smooth_softmax", 0) != 0;
    // Set by passes/bind_kv_cache: the pasts are the runtime's cache buffers, written in place.
    in_place_ = spec.a().get_int("mminfer_cache_in_place", 0) != 0;
    table_input_ = in_place_ ? static_cast<int>(spec.a().get_int("mminfer_block_table_input", -1)) : -1;
    if (!causal_ && window_ > 0) gqa_fail("local_window_size needs causal attention");
    if (spec.a().get_int("sliding_window_cache", 0) != 0) gqa_fail("sliding_window_cache is not supported");
    if (spec.a().get_int("qk_output", 0) != 0) gqa_fail("qk_output is not supported");
    for (size_t i = 12; i < spec.num_inputs; ++i)
      if (spec.has_input(i) && static_cast<int>(i) != table_input_) gqa_fail("input " + std::to_string(i) + " (KV-cache quantization scales or QK norm) is not supported");
  }

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    GqaShape s = gqa_shape(in, heads_, kv_heads_, in_place_, table_input_);
    DType t = in[0]->dtype();
    out[0] = {t, {s.batch, s.seq, heads_ * s.head}};
    for (size_t i = 1; i < out.size() && i < 3; ++i) out[i] = {t, {s.batch, kv_heads_, s.present, s.head}};
    if (out.size() > 3) gqa_fail("output_qk is not supported");
  }

  // present_key/present_value may overwrite past_key/past_value (same shape: a max-length cache).
  int inplace_input(int o) const override { return o == 1 ? 3 : o == 2 ? 4 : -1; }

  void run(const Inputs& in, Outputs& out) override {
    GqaShape s = gqa_shape(in, heads_, kv_heads_, in_place_, table_input_);
    const int64_t B = s.batch, S = s.seq, H = s.head, N = heads_, NK = kv_heads_, T = s.present;
    const int32_t* seqlens = in[5]->data<int32_t>();
    const Tensor* pk_t = in.size() > 3 ? in[3] : nullptr;
    const Tensor* pv_t = in.size() > 4 ? in[4] : nullptr;
    // Per batch entry: keys already in the cache and the total after this step (ONNX Runtime's
    // rule: a query as long as total_sequence_length is a first prompt, right-padded per entry).
    const bool first_prompt = S == s.total;
    if (S > 1 && !first_prompt && B != 1) gqa_fail("a multi-token step after a prompt needs batch size 1");
    std::vector<int64_t> past_len(B), total_len(B);
    for (int64_t b = 0; b < B; ++b) {
      int64_t tot = int64_t(seqlens[b]) + 1;
      int64_t past = first_prompt ? 0 : tot - S;
      if (tot < 1 || tot > s.total || past < 0 || past > s.past || past + S > T)
        gqa_fail("seqlens_k[" + std::to_string(b) + "] = " + std::to_string(seqlens[b]) + " does not fit a step of " +
                 std::to_string(S) + " tokens after a cache of " + std::to_string(s.past) + " with total_sequence_length " +
                 std::to_string(s.total));
      past_len[b] = past, total_len[b] = tot;
    }
    // Rotary tables and positions.
    const Tensor* cos_t = in.size() > 7 ? in[7] : nullptr;
    const Tensor* sin_t = in.size() > 8 ? in[8] : nullptr;
    const Tensor* pos_t = in.size() > 9 ? in[9] : nullptr;
    int64_t rot_dim = 0;
    FloatIn cosf, sinf;
    if (rotary_) {
      if (!cos_t || !sin_t) gqa_fail("do_rotary needs cos_cache and sin_cache");
      if (cos_t->rank() != 2 || cos_t->shape() != sin_t->shape() || cos_t->dtype() != in[0]->dtype() || sin_t->dtype() != in[0]->dtype())
        gqa_fail("cos_cache and sin_cache must be the same [max_position, rotary_dim / 2] shape, of query's dtype");
      rot_dim = 2 * cos_t->dim(1);
      if (rot_dim > H || rot_dim == 0) gqa_fail("rotary_dim " + std::to_string(rot_dim) + " does not fit head size " + std::to_string(H));
      if (pos_t && (pos_t->dtype() != DType::kInt64 || pos_t->shape() != Shape{B, S})) gqa_fail("position_ids must be int64 [batch, sequence]");
      cosf = FloatIn(cos_t), sinf = FloatIn(sin_t);
    }
    // Each new token's rotary position, checked here: nothing may throw inside the threads.
    std::vector<int64_t> positions(rotary_ ? static_cast<size_t>(B * S) : 0);
    for (int64_t b = 0; rotary_ && b < B; ++b)
      for (int64_t i = 0; i < S; ++i) {
        int64_t pos = pos_t ? pos_t->data<int64_t>()[b * S + i] : past_len[b] + i;
        if (pos < 0 || pos >= cos_t->dim(0))
          gqa_fail("position " + std::to_string(pos) + " is outside the rotary cache of " + std::to_string(cos_t->dim(0)));
        positions[static_cast<size_t>(b * S + i)] = pos;
      }
    auto position = [&](int64_t b, int64_t i) { return positions[static_cast<size_t>(b * S + i)]; };
    // Additive bias [B|1, N|1, S, total] and per-head sinks.
    const Tensor* bias_t = in.size() > 10 ? in[10] : nullptr;
    FloatIn biasf(bias_t);
    if (bias_t && (bias_t->rank() != 4 || (bias_t->dim(0) != 1 && bias_t->dim(0) != B) || (bias_t->dim(1) != 1 && bias_t->dim(1) != N) ||
                   bias_t->dim(2) != S || bias_t->dim(3) != s.total || bias_t->dtype() != in[0]->dtype()))
      gqa_fail("attention_bias must be [batch or 1, num_heads or 1, " + std::to_string(S) + ", " + std::to_string(s.total) + "]");
    const Tensor* sink_t = in.size() > 11 ? in[11] : nullptr;
    FloatIn sinkf(sink_t);
    if (sink_t && sink_t->numel() != N) gqa_fail("head_sink must hold one value per head");

    // In place: the caches are the pasts themselves (buffers the runtime lent this run), written
    // row by row (narrowed or quantized unless float32) and read through kv_rows.h.
    if (in_place_ && (!pk_t || !pv_t || s.past < s.total))
      gqa_fail("an in-place cache needs pasts of at least total_sequence_length positions");
    const DType cache_t = in_place_ ? pk_t->dtype() : DType::kFloat32;
    FloatIn qf(in[0]), kf(s.packed ? nullptr : in[1]), vf(s.packed ? nullptr : in[2]);
    FloatIn pkf(in_place_ ? nullptr : pk_t), pvf(in_place_ ? nullptr : pv_t);
    FloatOut of(out[0], B * S * N * H);
    // Not in place: present outputs [B, NK, T, H] in float, past rows copied in.
    const int64_t cache_numel = in_place_ ? 0 : B * NK * T * H;
    FloatOut pkey(in_place_ || out.size() < 2 ? nullptr : out[1], cache_numel);
    FloatOut pval(in_place_ || out.size() < 3 ? nullptr : out[2], cache_numel);
    KvRows key_rows, value_rows;
    if (in_place_) {
      key_rows = kv_rows(*pk_t, H, NK, s.table, s.table_width), value_rows = kv_rows(*pv_t, H, NK, s.table, s.table_width);
      if (s.table) {
        std::string why = check_block_table(s.table, s.table_width, s.block, pk_t->dim(0), total_len);
        if (!why.empty()) gqa_fail(why);
      }
    }
    const int64_t q_row = s.packed ? (N + 2 * NK) * H : N * H, kv_row = s.packed ? q_row : NK * H;
    const float* qd = qf.data();
    const float* kd = s.packed ? qd + N * H : kf.data();
    const float* vd = s.packed ? qd + (N + NK) * H : vf.data();

    // The cache: this step's rows (keys rotated) at their positions; not in place, the past rows
    // before them and zeros after.
    parallel_for(B * NK, 1, [&](int64_t c0, int64_t c1) {
      std::vector<float> row(static_cast<size_t>(H));
      for (int64_t c = c0; c < c1 && in_place_; ++c) {
        int64_t b = c / NK, kh = c % NK;
        for (int which = 0; which < 2; ++which) {
          for (int64_t i = 0; i < S; ++i) {
            std::memcpy(row.data(), (which ? vd : kd) + (b * S + i) * kv_row + kh * H, sizeof(float) * H);
            if (rotary_ && !which) {
              int64_t pos = position(b, i);
              cached_attention::rotate(row.data(), rot_dim, cosf.data() + pos * rot_dim / 2, sinf.data() + pos * rot_dim / 2, interleaved_);
            }
            store_row((which ? value_rows : key_rows).row(b, kh, past_len[b] + i), row.data(), H, cache_t);
          }
        }
      }
      for (int64_t c = c0; c < c1 && !in_place_; ++c) {
        int64_t b = c / NK, kh = c % NK;
        for (int which = 0; which < 2; ++which) {
          float* dst = (which ? pval : pkey).data() + c * T * H;
          const float* past = which ? pvf.data() : pkf.data();
          const float* src = which ? vd : kd;
          bool shared = past && past + c * s.past * H == dst;
          if (past && !shared) std::memcpy(dst, past + c * s.past * H, sizeof(float) * past_len[b] * H);
          for (int64_t i = 0; i < S; ++i) {
            float* row = dst + (past_len[b] + i) * H;
            std::memcpy(row, src + (b * S + i) * kv_row + kh * H, sizeof(float) * H);
            if (rotary_ && !which) {
              int64_t pos = position(b, i);
              cached_attention::rotate(row, rot_dim, cosf.data() + pos * rot_dim / 2, sinf.data() + pos * rot_dim / 2, interleaved_);
            }
          }
          if (!shared) std::fill(dst + (past_len[b] + S) * H, dst + T * H, 0.f);
        }
      }
    });

    const float scale = scale_ != 0.f ? scale_ : 1.f / std::sqrt(static_cast<float>(H));
    const int64_t group = N / NK;
    // An item: up to kGroupRows query heads of one KV head, whose rows see the same keys at each
    // position and so read each key and value row once (cached_attention::run).
    const int64_t per_kv = (group + cached_attention::kGroupRows - 1) / cached_attention::kGroupRows;
    parallel_for(B * NK * per_kv, 1, [&](int64_t t0, int64_t t1) {
      std::vector<float> scratch(static_cast<size_t>(cached_attention::scratch_floats(T)));
      std::vector<float> qbuf(static_cast<size_t>(cached_attention::kGroupRows * S * H));
      std::vector<int64_t> lo(static_cast<size_t>(cached_attention::kGroupRows)), hi(lo.size());
      // In place: the cache read once per KV head for all its query heads.
      KvReader reader(key_rows, value_rows, cache_t, H, H);
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t c = t / per_kv, b = c / NK, kh = c % NK;
        const int64_t h0 = kh * group + (t % per_kv) * cached_attention::kGroupRows;
        const int64_t heads = std::min<int64_t>(cached_attention::kGroupRows, (kh + 1) * group - h0);
        // Query rows, head-major: row (g, i) of head h0 + g at (g * S + i) * H.
        for (int64_t g = 0; g < heads; ++g)
          for (int64_t i = 0; i < S; ++i) {
            float* row = qbuf.data() + (g * S + i) * H;
            std::memcpy(row, qd + (b * S + i) * q_row + (h0 + g) * H, sizeof(float) * H);
            if (rotary_) {
              int64_t pos = position(b, i);
              cached_attention::rotate(row, rot_dim, cosf.data() + pos * rot_dim / 2, sinf.data() + pos * rot_dim / 2, interleaved_);
            }
          }
        cached_attention::Rows p{};
        if (in_place_) {
          reader.point(p, b, kh, total_len[b]);
        } else {
          p.k = pkey.data() + c * T * H, p.v = pval.data() + c * T * H;
          p.kv_stride = p.kv_stride_v = H;
        }
        p.sq = heads, p.d = H, p.dv = H;
        p.q_stride = S * H, p.out_stride = H;
        p.scale = scale, p.softcap = softcap_;
        p.has_sink = smooth_ || sink_t;
        p.sinks = sink_t ? sinkf.data() + h0 : nullptr;
        p.lo = lo.data(), p.hi = hi.data();
        for (int64_t i = 0; i < S; ++i) {
          // Row i sees keys up to itself (causal), the last local_window_size of them (itself
          // included, as ONNX Runtime 1.30 counts), never past its sequence's total length
          // (right padding of a batched prompt). The same for every head.
          std::fill(hi.begin(), hi.end(), causal_ ? std::min(past_len[b] + i + 1, total_len[b]) : total_len[b]);
          std::fill(lo.begin(), lo.end(), window_ > 0 ? std::max<int64_t>(0, past_len[b] + i + 1 - window_) : 0);
          p.q = qbuf.data() + i * H;
          p.out = of.data() + (b * S + i) * N * H + h0 * H;
          if (bias_t) {
            const bool per_head = bias_t->dim(1) != 1;
            const int64_t bb = bias_t->dim(0) == 1 ? 0 : b, bh = per_head ? h0 : 0;
            p.bias = biasf.data() + ((bb * bias_t->dim(1) + bh) * S + i) * s.total;
            p.bias_stride = per_head ? S * s.total : 0;
          }
          cached_attention::run(p, scratch.data());
        }
      }
    });
    of.finish(), pkey.finish(), pval.finish();
  }

 private:
  int64_t heads_ = 0, kv_heads_ = 0, window_ = -1;
  float scale_ = 0.f, softcap_ = 0.f;
  bool causal_ = true, rotary_ = false, interleaved_ = false, smooth_ = false, in_place_ = false;
  int table_input_ = -1;
};

}  // namespace

void register_group_query_attention(Registry& r) {
  r.add({"GroupQueryAttention", "com.microsoft", 1, 1000, 0, {DType::kFloat32, DType::kFloat16},
         [](const KernelSpec& s) { return std::make_unique<GroupQueryAttentionKernel>(s); }},
        {.foldable = false, .heavy = true});
}

}  // namespace mminfer::kernels
