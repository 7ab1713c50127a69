// mminfer::CachedAttention (made by passes/bind_kv_cache): attention over a KV cache the runtime
// owns. Inputs: Q [B, Hq, S, D], this step's K [B, Hkv, S, D] and V [B, Hkv, S, Dv], the caches
// [B, Hkv, T, D] and [B, Hkv, T, Dv] (T: capacity), and each sequence's cached length (int64 [B]).
// The new rows are written into the caches at their sequence's length (the caches are state:
// this op updates its inputs in place), then each query head attends to its KV head's rows up to
// its own position (causal) or to all of them. Output [B, Hq, S, Dv]. Caches may be float16: the
// new rows are narrowed as they are written, and each KV head's rows widened once per step for
// all the query heads that share it. Or int8 [B, Hkv, T, D + 4] (core/int8_rows.h): each new row
// quantized with its own scale, and the codes dequantized in registers as attention reads them.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/cpu_features.h"
#include "core/half.h"
#include "core/int8_rows.h"
#include "core/parallel.h"
#include "kernels/cpu/gemm/fp16_gemm.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/nn/cached_attention.h"

namespace mminfer::kernels {

namespace {

// Multiply-adds below which a share of the work is not worth another thread (~10 us at 1 thread).
constexpr int64_t kMinParallelWork = int64_t(1) << 17;

class KvCacheAttentionKernel final : public Kernel {
 public:
  explicit KvCacheAttentionKernel(const KernelSpec& s)
      : name_(s.name), scale_(s.a().get_float("scale", 0.f)), causal_(s.a().get_int("causal", 1) != 0) {
    if (s.num_inputs != 6) fail("CachedAttention '" + name_ + "' needs 6 inputs, got " + std::to_string(s.num_inputs));
  }

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    Dims d = check(in);
    out[0] = {DType::kFloat32, {d.B, d.Hq, d.S, d.Dv}};
  }

  void run(const Inputs& in, Outputs& out) override {
    Dims d = check(in);
    const Tensor& lengths_t = *in[5];
    std::vector<int64_t> len(lengths_t.data<int64_t>(), lengths_t.data<int64_t>() + d.B);
    for (int64_t b = 0; b < d.B; ++b)
      if (len[b] < 0 || len[b] + d.S > d.T)
        fail("CachedAttention '" + name_ + "': sequence " + std::to_string(b) + " holds " + std::to_string(len[b]) +
             " positions and " + std::to_string(d.S) + " more do not fit a cache of " + std::to_string(d.T));
    const bool half = in[3]->dtype() == DType::kFloat16, int8 = in[3]->dtype() == DType::kInt8;
    // The caches are buffers the runtime lent this run to be written.
    void* kc = const_cast<void*>(in[3]->raw());
    void* vc = const_cast<void*>(in[4]->raw());
    const float* kn = in[1]->data<float>();
    const float* vn = in[2]->data<float>();
    // Rows [at, at + count) of a cache whose rows hold `dim` values.
    auto put = [&](void* cache, int64_t at, const float* rows, int64_t count, int64_t dim) {
      if (int8) {
        const int64_t width = int8_rows::bytes(dim);
        for (int64_t i = 0; i < count; ++i) int8_rows::quantize(rows + i * dim, dim, static_cast<int8_t*>(cache) + (at + i) * width);
      } else if (half) {
        uint16_t* h = static_cast<uint16_t*>(cache) + at * dim;
        for (int64_t i = 0; i < count * dim; ++i) h[i] = float_to_half(rows[i]);
      } else {
        std::memcpy(static_cast<float*>(cache) + at * dim, rows, sizeof(float) * count * dim);
      }
    };
    // Threads pay only for enough work: a fork and join costs microseconds, about what one KV
    // head of a short decode step takes, so short steps run on the calling thread.
    const int64_t longest = *std::max_element(len.begin(), len.end()) + d.S;
    const int64_t write_grain = std::max<int64_t>(1, kMinParallelWork / std::max<int64_t>(1, d.S * (d.D + d.Dv)));
    parallel_for(d.B * d.Hkv, write_grain, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        int64_t b = c / d.Hkv;
        put(kc, c * d.T + len[b], kn + c * d.S * d.D, d.S, d.D);
        put(vc, c * d.T + len[b], vn + c * d.S * d.Dv, d.S, d.Dv);
      }
    });
    const float scale = scale_ != 0.f ? scale_ : 1.f / std::sqrt(static_cast<float>(d.D));
    const int64_t group = d.Hq / d.Hkv;
    const float* q = in[0]->data<float>();
    float* o = out[0]->data<float>();
    // One KV head and the query heads that read it per item, so a half cache is widened once.
    const int64_t head_work = group * d.S * longest * (d.D + d.Dv);
    parallel_for(d.B * d.Hkv, std::max<int64_t>(1, kMinParallelWork / std::max<int64_t>(1, head_work)), [&](int64_t c0, int64_t c1) {
      std::vector<float> scratch(static_cast<size_t>(cached_attention::scratch_floats(d.T)));
      std::vector<int64_t> lo(static_cast<size_t>(group), 0), hi(static_cast<size_t>(group));
      std::vector<float> wide_k, wide_v;
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t b = c / d.Hkv, visible = len[b] + d.S;
        const float *keys = nullptr, *values = nullptr;
        const int64_t kw = int8_rows::bytes(d.D), vw = int8_rows::bytes(d.Dv);
        if (half) {
          keys = widen(static_cast<const uint16_t*>(kc) + c * d.T * d.D, visible * d.D, wide_k);
          values = widen(static_cast<const uint16_t*>(vc) + c * d.T * d.Dv, visible * d.Dv, wide_v);
        } else if (!int8) {  // int8 rows are read as they are, below
          keys = static_cast<const float*>(kc) + c * d.T * d.D;
          values = static_cast<const float*>(vc) + c * d.T * d.Dv;
        }
        // Position i of the group's query heads: rows S * D apart that all see the same keys,
        // so each key and value row is read once for the whole group.
        const int64_t first_head = b * d.Hq + (c % d.Hkv) * group;
        for (int64_t i = 0; i < d.S; ++i) {
          std::fill(hi.begin(), hi.end(), causal_ ? len[b] + i + 1 : visible);
          cached_attention::Rows p{};
          p.q = q + (first_head * d.S + i) * d.D, p.q_stride = d.S * d.D;
          p.k = keys, p.kv_stride = d.D;
          p.v = values, p.kv_stride_v = d.Dv;
          if (int8) {
            p.k8 = static_cast<const int8_t*>(kc) + c * d.T * kw, p.kv_stride = kw;
            p.v8 = static_cast<const int8_t*>(vc) + c * d.T * vw, p.kv_stride_v = vw;
          }
          p.out = o + (first_head * d.S + i) * d.Dv, p.out_stride = d.S * d.Dv;
          p.lo = lo.data(), p.hi = hi.data();
          p.sq = group, p.d = d.D, p.dv = d.Dv;
          p.scale = scale;
          cached_attention::run(p, scratch.data());
        }
      }
    });
  }

 private:
  struct Dims {
    int64_t B, Hq, Hkv, S, D, Dv, T;
  };

  // Widens n halves into `buffer` (32-byte aligned for the vector path); returns where.
  static const float* widen(const uint16_t* h, int64_t n, std::vector<float>& buffer) {
    buffer.resize(static_cast<size_t>(n + 8));
    float* f = buffer.data();
    f += (32 - reinterpret_cast<uintptr_t>(f) % 32) % 32 / sizeof(float);
    static const bool avx2 = cpu_features().avx2 && cpu_features().f16c;
    if (avx2) {
      widen_halves_avx2(h, n, f);
    } else {
      for (int64_t i = 0; i < n; ++i) f[i] = half_to_float(h[i]);
    }
    return f;
  }

  Dims check(const Inputs& in) const {
    const char* names[] = {"query", "key", "value", "key cache", "value cache", "cache lengths"};
    for (int i = 0; i < 6; ++i) need_input(in, i, names[i]);
    for (int i = 0; i < 5; ++i) {
      DType t = in[i]->dtype();
      bool cache = i >= 3, ok_type = t == DType::kFloat32 || (cache && (t == DType::kFloat16 || t == DType::kInt8));
      if (!ok_type || in[i]->rank() != 4)
        fail("CachedAttention '" + name_ + "': " + names[i] + " must be " + (cache ? "float32, float16 or int8" : "float32") +
             " of rank 4, got " + dtype_name(t) + " " + shape_str(in[i]->shape()));
    }
    if (in[3]->dtype() != in[4]->dtype()) fail("CachedAttention '" + name_ + "': the key and value caches differ in dtype");
    const Shape &q = in[0]->shape(), &k = in[1]->shape(), &v = in[2]->shape(), &kc = in[3]->shape(), &vc = in[4]->shape();
    Dims d{q[0], q[1], k[1], q[2], q[3], v[3], kc[2]};
    // An int8 cache's rows hold their scale after the codes.
    const bool int8 = in[3]->dtype() == DType::kInt8;
    const int64_t kw = int8 ? int8_rows::bytes(d.D) : d.D, vw = int8 ? int8_rows::bytes(d.Dv) : d.Dv;
    bool ok = k[0] == d.B && v[0] == d.B && k[2] == d.S && v[2] == d.S && k[3] == d.D && v[1] == d.Hkv && d.Hkv > 0 &&
              d.Hq % d.Hkv == 0 && kc == Shape{d.B, d.Hkv, d.T, kw} && vc == Shape{d.B, d.Hkv, d.T, vw};
    if (!ok)
      fail("CachedAttention '" + name_ + "': shapes do not agree (query " + shape_str(q) + ", key " + shape_str(k) + ", value " +
           shape_str(v) + ", caches " + shape_str(kc) + " and " + shape_str(vc) + ")");
    if (in[5]->dtype() != DType::kInt64 || in[5]->numel() != d.B)
      fail("CachedAttention '" + name_ + "': cache lengths must be int64 with one value per sequence");
    return d;
  }

  std::string name_;
  float scale_;
  bool causal_;
};

}  // namespace

void register_kv_cache_attention(Registry& r) {
  r.add({"CachedAttention", "mminfer", 1, 1000, 0, {DType::kFloat32},  // the query's dtype; caches float32, float16 or int8
         [](const KernelSpec& s) { return std::make_unique<KvCacheAttentionKernel>(s); }},
        {.foldable = false, .heavy = true});
}

}  // namespace mminfer::kernels
