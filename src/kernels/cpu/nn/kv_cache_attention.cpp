// mminfer::CachedAttention (made by passes/bind_kv_cache): attention over a KV cache the runtime
// owns. Inputs: Q [B, Hq, S, D], this step's K [B, Hkv, S, D] and V [B, Hkv, S, Dv], the caches,
// each sequence's cached length (int64 [B]) and, optionally, a block table (int32 [B, W]). Without
// the table the caches are [B, Hkv, T, D] and [B, Hkv, T, Dv] (T: capacity); with it they are pools
// of blocks, [blocks, Hkv, block, D] and [blocks, Hkv, block, Dv], and sequence b's position p is
// row p % block of block table[b][p / block] (kv_rows.h), so T = W * block.
// The new rows are written into the caches at their sequence's length (the caches are state:
// this op updates its inputs in place), then each query head attends to its KV head's rows up to
// its own position (causal) or to all of them. Output [B, Hq, S, Dv]. Caches may be float16: the
// new rows are narrowed as they are written, and each KV head's rows widened once per step for
// all the query heads that share it. Or int8 [.., D + 4] (core/int8_rows.h): each new row
// quantized with its own scale, and the codes dequantized in registers as attention reads them.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "core/int8_rows.h"
#include "core/parallel.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/nn/cached_attention.h"
#include "kernels/cpu/nn/kv_rows.h"

namespace mminfer::kernels {

namespace {

// Multiply-adds below which a share of the work is not worth another thread (~10 us at 1 thread):
// OpenMP's fork and join cost microseconds. A held spin team hands a chunk over in about one,
// so there a quarter of that pays.
int64_t min_parallel_work() { return detail::spin_team_here() ? int64_t(1) << 15 : int64_t(1) << 17; }

class KvCacheAttentionKernel final : public Kernel {
 public:
  explicit KvCacheAttentionKernel(const KernelSpec& s)
      : name_(s.name), scale_(s.a().get_float("scale", 0.f)), causal_(s.a().get_int("causal", 1) != 0) {
    if (s.num_inputs != 6 && s.num_inputs != 7)
      fail("CachedAttention '" + name_ + "' needs 6 or 7 inputs, got " + std::to_string(s.num_inputs));
  }

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    Dims d = check(in);
    out[0] = {DType::kFloat32, {d.B, d.Hq, d.S, d.Dv}};
  }

  // check() reads shapes and dtypes only; the lengths are read by run.
  bool infers_from_shapes() const override { return true; }

  void run(const Inputs& in, Outputs& out) override {
    Dims d = check(in);
    const Tensor& lengths_t = *in[5];
    std::vector<int64_t> len(lengths_t.data<int64_t>(), lengths_t.data<int64_t>() + d.B), needed(len);
    for (int64_t b = 0; b < d.B; ++b) {
      if (len[b] < 0 || len[b] + d.S > d.T)
        fail("CachedAttention '" + name_ + "': sequence " + std::to_string(b) + " holds " + std::to_string(len[b]) +
             " positions and " + std::to_string(d.S) + " more do not fit a cache of " + std::to_string(d.T));
      needed[b] += d.S;
    }
    const DType cache_t = in[3]->dtype();
    // The caches are buffers the runtime lent this run to be written.
    const KvRows keys_at = kv_rows(*in[3], d.D, d.Hkv, d.table, d.W), values_at = kv_rows(*in[4], d.Dv, d.Hkv, d.table, d.W);
    if (keys_at.table) {
      std::string why = check_block_table(keys_at.table, d.W, d.block, in[3]->dim(0), needed);
      if (!why.empty()) fail("CachedAttention '" + name_ + "': " + why);
    }
    const float* kn = in[1]->data<float>();
    const float* vn = in[2]->data<float>();
    // Threads pay only for enough work: a fork and join costs microseconds, about what one KV
    // head of a short decode step takes, so short steps run on the calling thread.
    const int64_t longest = *std::max_element(needed.begin(), needed.end());
    const int64_t write_grain = std::max<int64_t>(1, min_parallel_work() / std::max<int64_t>(1, d.S * (d.D + d.Dv)));
    parallel_for(d.B * d.Hkv, write_grain, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t b = c / d.Hkv, h = c % d.Hkv;
        for (int64_t i = 0; i < d.S; ++i) {
          store_row(keys_at.row(b, h, len[b] + i), kn + (c * d.S + i) * d.D, d.D, cache_t);
          store_row(values_at.row(b, h, len[b] + i), vn + (c * d.S + i) * d.Dv, d.Dv, cache_t);
        }
      }
    });
    const float scale = scale_ != 0.f ? scale_ : 1.f / std::sqrt(static_cast<float>(d.D));
    const int64_t group = d.Hq / d.Hkv;
    const float* q = in[0]->data<float>();
    float* o = out[0]->data<float>();
    // Items are query heads, so that 2 threads share 3 KV heads 5 : 4 rather than 2 : 1; a
    // chunk runs the heads it holds of one KV head together, reading that head's keys once.
    const int64_t head_work = d.S * longest * (d.D + d.Dv);
    parallel_for(d.B * d.Hq, std::max<int64_t>(1, min_parallel_work() / std::max<int64_t>(1, head_work)), [&](int64_t c0, int64_t c1) {
      // No query row sees more than `longest` keys.
      std::vector<float> scratch(static_cast<size_t>(cached_attention::scratch_floats(longest)));
      std::vector<int64_t> lo(static_cast<size_t>(group), 0), hi(static_cast<size_t>(group));
      KvReader reader(keys_at, values_at, cache_t, d.D, d.Dv);
      for (int64_t c = c0; c < c1;) {
        const int64_t b = c / d.Hq, h = c % d.Hq / group, visible = needed[b];
        const int64_t first_head = c, heads = std::min(c1, b * d.Hq + (h + 1) * group) - c;
        cached_attention::Rows p{};
        reader.point(p, b, h, visible);
        // Position i of these query heads: rows S * D apart that all see the same keys, so each
        // key and value row is read once for all of them.
        for (int64_t i = 0; i < d.S; ++i) {
          std::fill(hi.begin(), hi.end(), causal_ ? len[b] + i + 1 : visible);
          p.q = q + (first_head * d.S + i) * d.D, p.q_stride = d.S * d.D;
          p.out = o + (first_head * d.S + i) * d.Dv, p.out_stride = d.S * d.Dv;
          p.lo = lo.data(), p.hi = hi.data();
          p.sq = heads, p.d = d.D, p.dv = d.Dv;
          p.scale = scale;
          cached_attention::run(p, scratch.data());
        }
        c += heads;
      }
    });
  }

 private:
  struct Dims {
    int64_t B, Hq, Hkv, S, D, Dv, T;
    int64_t block, W;  // positions per cache block and blocks per sequence (T when contiguous, 1)
    const int32_t* table;  // the block table, or null
  };

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
    const Tensor* table = in.size() > 6 ? in[6] : nullptr;
    Dims d{q[0], q[1], k[1], q[2], q[3], v[3], kc[2], kc[2], 1, nullptr};
    if (table) {
      if (table->dtype() != DType::kInt32 || table->rank() != 2 || table->dim(0) != d.B || table->dim(1) < 1)
        fail("CachedAttention '" + name_ + "': the block table must be int32 [" + std::to_string(d.B) + ", blocks], got " +
             dtype_name(table->dtype()) + " " + shape_str(table->shape()));
      d.W = table->dim(1), d.T = d.block * d.W, d.table = table->data<int32_t>();
    }
    // An int8 cache's rows hold their scale after the codes.
    const bool int8 = in[3]->dtype() == DType::kInt8;
    const int64_t kw = int8 ? int8_rows::bytes(d.D) : d.D, vw = int8 ? int8_rows::bytes(d.Dv) : d.Dv;
    const int64_t slots = table ? kc[0] : d.B;  // pool blocks, or one slot per sequence
    bool ok = k[0] == d.B && v[0] == d.B && k[2] == d.S && v[2] == d.S && k[3] == d.D && v[1] == d.Hkv && d.Hkv > 0 &&
              d.Hq % d.Hkv == 0 && kc == Shape{slots, d.Hkv, d.block, kw} && vc == Shape{slots, d.Hkv, d.block, vw};
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
