// com.microsoft MultiHeadAttention: self- or cross-attention with separate Q, K, V projections
// (their bias added here), as ONNX Runtime's transformer optimizer and Whisper/T5 exports write it.
// Inputs: 0 query [B, S, N*H]; 1 key [B, L, N*H], or [B, N, L, H] already in heads (cross
// attention over a cached encoder output); 2 value likewise ([B, L, N*Hv] or [B, N, L, Hv]);
// 3 bias [N*H + N*H + N*Hv]; 4 key_padding_mask int32 [B] (key lengths), [B, T] or [B, S, T]
// (1 keep, 0 mask); 5 attention_bias [B|1, N|1, S, T]; 6 past_key, 7 past_value [B, N, P, H|Hv].
// Outputs: output [B, S, N*Hv], present_key [B, N, T, H], present_value [B, N, T, Hv] with
// T = P + L. Masked keys get mask_filter_value added to their score, as ONNX Runtime does.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/parallel.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/nn/cached_attention.h"
#include "kernels/cpu/nn/float_io.h"

namespace mminfer::kernels {

namespace {

[[noreturn]] void mha_fail(const std::string& m) { fail("MultiHeadAttention: " + m); }

const Tensor* opt(const Inputs& in, size_t i) { return in.size() > i ? in[i] : nullptr; }

struct MhaShape {
  int64_t batch, seq, kv_seq, past, total, head, vhead;
  bool kv_in_heads;  // key/value given as [B, N, L, H]
};

MhaShape mha_shape(const Inputs& in, int64_t n) {
  const Tensor& q = need_input(in, 0, "query");
  if (q.dtype() != DType::kFloat32 && q.dtype() != DType::kFloat16) mha_fail("query must be float32 or float16");
  if (q.rank() != 3) mha_fail("query must be [batch, sequence, hidden] (packed QKV is not supported), got " + shape_str(q.shape()));
  const Tensor* k = opt(in, 1);
  const Tensor* v = opt(in, 2);
  if (!k || !v) mha_fail("key and value are required (packed QKV/KV is not supported)");
  if (k->dtype() != q.dtype() || v->dtype() != q.dtype()) mha_fail("key and value must have query's dtype");
  MhaShape s{};
  s.batch = q.dim(0), s.seq = q.dim(1);
  if (q.dim(2) % n != 0) mha_fail("query's hidden size " + std::to_string(q.dim(2)) + " is not a multiple of num_heads " + std::to_string(n));
  s.head = q.dim(2) / n;
  s.kv_in_heads = k->rank() == 4;
  if (s.kv_in_heads) {
    if (k->dim(0) != s.batch || k->dim(1) != n || k->dim(3) != s.head)
      mha_fail("a 4-D key must be [batch, num_heads, length, head_size], got " + shape_str(k->shape()));
    if (v->rank() != 4 || v->dim(0) != s.batch || v->dim(1) != n || v->dim(2) != k->dim(2))
      mha_fail("with a 4-D key, value must be [batch, num_heads, " + std::to_string(k->dim(2)) + ", head_size], got " + shape_str(v->shape()));
    s.kv_seq = k->dim(2), s.vhead = v->dim(3);
    if (opt(in, 6) || opt(in, 7)) mha_fail("past_key/past_value cannot go with a 4-D key (it is the whole cache already)");
  } else {
    if (k->rank() != 3 || k->dim(0) != s.batch || k->dim(2) != q.dim(2))
      mha_fail("key must be [batch, length, " + std::to_string(q.dim(2)) + "] (packed KV is not supported), got " + shape_str(k->shape()));
    if (v->rank() != 3 || v->dim(0) != s.batch || v->dim(1) != k->dim(1) || v->dim(2) % n != 0)
      mha_fail("value must be [batch, " + std::to_string(k->dim(1)) + ", num_heads * v_head_size], got " + shape_str(v->shape()));
    s.kv_seq = k->dim(1), s.vhead = v->dim(2) / n;
  }
  const Tensor* pk = opt(in, 6);
  const Tensor* pv = opt(in, 7);
  if ((pk == nullptr) != (pv == nullptr)) mha_fail("past_key and past_value must be both given or both omitted");
  if (pk) {
    if (pk->rank() != 4 || pk->dim(0) != s.batch || pk->dim(1) != n || pk->dim(3) != s.head || pk->dtype() != q.dtype())
      mha_fail("past_key must be [batch, num_heads, past, head_size] of query's dtype, got " + shape_str(pk->shape()));
    if (pv->rank() != 4 || pv->dim(0) != s.batch || pv->dim(1) != n || pv->dim(2) != pk->dim(2) || pv->dim(3) != s.vhead ||
        pv->dtype() != q.dtype())
      mha_fail("past_value must be [batch, num_heads, " + std::to_string(pk->dim(2)) + ", v_head_size], got " + shape_str(pv->shape()));
    s.past = pk->dim(2);
  }
  if (opt(in, 8) || opt(in, 9)) mha_fail("past_sequence_length and cache_indirection (shared buffers, beams) are not supported");
  s.total = s.past + s.kv_seq;
  if (const Tensor* b = opt(in, 3)) {
    if (b->dtype() != q.dtype() || b->rank() != 1 || b->dim(0) != n * (2 * s.head + s.vhead))
      mha_fail("bias must be [" + std::to_string(n * (2 * s.head + s.vhead)) + "] of query's dtype, got " + shape_str(b->shape()));
  }
  if (const Tensor* m = opt(in, 4)) {
    bool ok = m->dtype() == DType::kInt32 &&
              ((m->rank() == 1 && m->dim(0) == s.batch) || (m->rank() == 2 && m->dim(0) == s.batch && m->dim(1) == s.total) ||
               (m->rank() == 3 && m->dim(0) == s.batch && m->dim(1) == s.seq && m->dim(2) == s.total));
    if (!ok)
      mha_fail("key_padding_mask must be int32 [batch], [batch, " + std::to_string(s.total) + "] or [batch, " + std::to_string(s.seq) +
               ", " + std::to_string(s.total) + "], got " + shape_str(m->shape()));
  }
  if (const Tensor* ab = opt(in, 5)) {
    if (ab->dtype() != q.dtype() || ab->rank() != 4 || (ab->dim(0) != 1 && ab->dim(0) != s.batch) || (ab->dim(1) != 1 && ab->dim(1) != n) ||
        ab->dim(2) != s.seq || ab->dim(3) != s.total)
      mha_fail("attention_bias must be [batch or 1, num_heads or 1, " + std::to_string(s.seq) + ", " + std::to_string(s.total) + "]");
  }
  return s;
}

class MultiHeadAttentionKernel final : public Kernel {
 public:
  explicit MultiHeadAttentionKernel(const KernelSpec& spec) {
    heads_ = spec.a().get_int("num_heads", 0);
    if (heads_ <= 0) mha_fail("num_heads must be positive");
    scale_ = spec.a().get_float("scale", 0.f);
    filter_ = spec.a().get_float("mask_filter_value", -10000.f);
    causal_ = spec.a().get_int("unidirectional", 0) != 0;
  }

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    MhaShape s = mha_shape(in, heads_);
    DType t = in[0]->dtype();
    out[0] = {t, {s.batch, s.seq, heads_ * s.vhead}};
    if (out.size() > 1) out[1] = {t, {s.batch, heads_, s.total, s.head}};
    if (out.size() > 2) out[2] = {t, {s.batch, heads_, s.total, s.vhead}};
    if (out.size() > 3) mha_fail("the qk output is not supported");
  }

  void run(const Inputs& in, Outputs& out) override {
    MhaShape s = mha_shape(in, heads_);
    const int64_t B = s.batch, S = s.seq, L = s.kv_seq, P = s.past, T = s.total, H = s.head, HV = s.vhead, N = heads_;
    FloatIn qf(in[0]), kf(in[1]), vf(in[2]), bf(opt(in, 3)), abf(opt(in, 5)), pkf(opt(in, 6)), pvf(opt(in, 7));
    const Tensor* mask = opt(in, 4);
    const Tensor* ab = opt(in, 5);
    FloatOut of(out[0], B * S * N * HV);
    FloatOut pkey(out.size() > 1 ? out[1] : nullptr, B * N * T * H), pval(out.size() > 2 ? out[2] : nullptr, B * N * T * HV);
    const float scale = scale_ != 0.f ? scale_ : 1.f / std::sqrt(static_cast<float>(H));
    const float* bias = bf.data();
    const bool additive = mask || ab;

    parallel_for(B * N, 1, [&](int64_t t0, int64_t t1) {
      std::vector<float> scratch(static_cast<size_t>(cached_attention::scratch_floats(T))), qbuf(static_cast<size_t>(S * H));
      std::vector<float> add(additive ? static_cast<size_t>(S * T) : 0);
      std::vector<int64_t> lo(static_cast<size_t>(S), 0), hi(static_cast<size_t>(S));
      for (int64_t t = t0; t < t1; ++t) {
        int64_t b = t / N, h = t % N;
        // The cache rows of this head: past, then this step's keys and values plus their bias.
        float* kc = pkey.data() + t * T * H;
        float* vc = pval.data() + t * T * HV;
        if (s.kv_in_heads) {
          std::memcpy(kc, kf.data() + t * L * H, sizeof(float) * L * H);
          std::memcpy(vc, vf.data() + t * L * HV, sizeof(float) * L * HV);
        } else {
          if (P) {
            std::memcpy(kc, pkf.data() + t * P * H, sizeof(float) * P * H);
            std::memcpy(vc, pvf.data() + t * P * HV, sizeof(float) * P * HV);
          }
          for (int64_t j = 0; j < L; ++j) {
            const float* ks = kf.data() + (b * L + j) * N * H + h * H;
            const float* vs = vf.data() + (b * L + j) * N * HV + h * HV;
            float* kd = kc + (P + j) * H;
            float* vd = vc + (P + j) * HV;
            for (int64_t c = 0; c < H; ++c) kd[c] = ks[c] + (bias ? bias[N * H + h * H + c] : 0.f);
            for (int64_t c = 0; c < HV; ++c) vd[c] = vs[c] + (bias ? bias[2 * N * H + h * HV + c] : 0.f);
          }
        }
        for (int64_t i = 0; i < S; ++i) {
          const float* qs = qf.data() + (b * S + i) * N * H + h * H;
          for (int64_t c = 0; c < H; ++c) qbuf[i * H + c] = qs[c] + (bias ? bias[h * H + c] : 0.f);
          hi[i] = causal_ ? std::min(T, P + i + 1) : T;
        }
        if (additive) additive_rows(mask, ab, abf.data(), b, h, S, T, add.data());
        cached_attention::Rows p{};
        p.q = qbuf.data(), p.q_stride = H;
        p.k = kc, p.v = vc, p.kv_stride = H, p.kv_stride_v = HV;
        p.out = of.data() + b * S * N * HV + h * HV, p.out_stride = N * HV;
        p.lo = lo.data(), p.hi = hi.data();
        p.bias = additive ? add.data() : nullptr, p.bias_stride = T;
        p.sq = S, p.d = H, p.dv = HV;
        p.scale = scale;
        cached_attention::run(p, scratch.data());
      }
    });
    of.finish(), pkey.finish(), pval.finish();
  }

 private:
  // [S, T] additive terms of one (batch, head): mask_filter_value where the padding mask says 0,
  // plus attention_bias.
  void additive_rows(const Tensor* mask, const Tensor* ab, const float* abd, int64_t b, int64_t h, int64_t S, int64_t T,
                     float* add) const {
    std::fill_n(add, S * T, 0.f);
    if (mask) {
      const int32_t* m = mask->data<int32_t>();
      for (int64_t i = 0; i < S; ++i)
        for (int64_t j = 0; j < T; ++j) {
          bool keep = mask->rank() == 1 ? j < m[b] : mask->rank() == 2 ? m[b * T + j] != 0 : m[(b * S + i) * T + j] != 0;
          if (!keep) add[i * T + j] = filter_;
        }
    }
    if (ab) {
      int64_t bb = ab->dim(0) == 1 ? 0 : b, bh = ab->dim(1) == 1 ? 0 : h;
      const float* src = abd + (bb * ab->dim(1) + bh) * S * T;
      for (int64_t k = 0; k < S * T; ++k) add[k] += src[k];
    }
  }

  int64_t heads_ = 0;
  float scale_ = 0.f, filter_ = -10000.f;
  bool causal_ = false;
};

}  // namespace

void register_multi_head_attention(Registry& r) {
  r.add({"MultiHeadAttention", "com.microsoft", 1, 1000, 0, {DType::kFloat32, DType::kFloat16},
         [](const KernelSpec& s) { return std::make_unique<MultiHeadAttentionKernel>(s); }},
        {.foldable = false, .heavy = true});
}

}  // namespace mminfer::kernels
