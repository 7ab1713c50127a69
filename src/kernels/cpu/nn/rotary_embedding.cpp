// Rotary position embedding (RoPE) in its two ONNX forms:
//   com.microsoft RotaryEmbedding (ONNX Runtime's contrib op): input, position_ids, cos_cache,
//     sin_cache; position_ids is [B, S] or one offset (position = offset + s).
//   ONNX RotaryEmbedding (opset 23): X, cos_cache, sin_cache, optional position_ids [B, S];
//     without position_ids the caches are already [B, S, rotary_dim / 2].
// The input is [B, S, N * D] or [B, N, S, D]. The first rotary_dim channels of each head are
// rotated, by halves (x[i], x[i + rotary_dim / 2]) or by interleaved pairs (x[2k], x[2k + 1]),
// with the position's cos/sin row; the rest of the head is copied. Computed in float.
#include <cmath>

#include "core/parallel.h"
#include "kernels/cpu/common/numeric_visit.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/nn/norm_params.h"

namespace mminfer::kernels {

namespace {

const std::vector<DType> kRotaryTypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

struct RotaryLayout {
  int64_t batch = 0, seq = 0, heads = 0, head_size = 0, rotary_dim = 0;
  int64_t batch_stride = 0, seq_stride = 0, head_stride = 0;
};

class RotaryKernel final : public Kernel {
 public:
  RotaryKernel(const KernelSpec& s, bool microsoft)
      : microsoft_(microsoft),
        interleaved_(s.a().get_int("interleaved", 0) != 0),
        num_heads_(s.a().get_int("num_heads", 0)),
        rotary_dim_(s.a().get_int("rotary_embedding_dim", 0)) {
    if (microsoft_ && s.a().get_int("is_packed_batching", 0) != 0)
      fail("is_packed_batching=1 (packed sequences) is not supported");
    if (num_heads_ < 0 || rotary_dim_ < 0) fail("num_heads and rotary_embedding_dim must be >= 0");
    if (rotary_dim_ > 0 && num_heads_ == 0) fail("num_heads must be given when rotary_embedding_dim is");
  }

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "input");
    layout(x, cos_cache(in), sin_cache(in), positions(in));
    out[0] = {x.dtype(), x.shape()};
  }

  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    const Tensor& cos_t = cos_cache(in);
    const Tensor& sin_t = sin_cache(in);
    const Tensor* pos_t = positions(in);
    RotaryLayout l = layout(x, cos_t, sin_t, pos_t);
    if (x.numel() == 0) return;
    int64_t half = l.rotary_dim / 2;
    std::vector<float> cos = norm_params::vector_values<float>(cos_t, cos_t.numel(), "cos_cache");
    std::vector<float> sin = norm_params::vector_values<float>(sin_t, sin_t.numel(), "sin_cache");
    // Row of the caches for (b, s): by position id, or (ONNX form without ids) by (b, s) itself.
    std::vector<int64_t> rows(static_cast<size_t>(l.batch * l.seq));
    std::vector<int64_t> ids = pos_t ? read_int_tensor(*pos_t, "position_ids") : std::vector<int64_t>();
    int64_t max_rows = cos_t.numel() / std::max<int64_t>(1, half);
    for (int64_t b = 0; b < l.batch; ++b)
      for (int64_t s = 0; s < l.seq; ++s) {
        int64_t row = ids.empty() ? b * l.seq + s : ids.size() == 1 ? ids[0] + s : ids[b * l.seq + s];
        if (row < 0 || row >= max_rows)
          fail("position " + std::to_string(row) + " is outside the cos/sin caches' " + std::to_string(max_rows) + " rows");
        rows[b * l.seq + s] = row;
      }
    visit_float_type(x.dtype(), "input", [&](auto tag) {
      using N = decltype(tag);
      using S = typename N::Storage;
      const S* src = x.data<S>();
      S* dst = out[0]->data<S>();
      parallel_for(l.batch * l.seq * l.heads, std::max<int64_t>(1, 1024 / l.head_size), [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          int64_t n = t % l.heads, bs = t / l.heads, s = bs % l.seq, b = bs / l.seq;
          int64_t off = b * l.batch_stride + s * l.seq_stride + n * l.head_stride;
          const S* xi = src + off;
          S* yo = dst + off;
          const float* c = cos.data() + rows[bs] * half;
          const float* sn = sin.data() + rows[bs] * half;
          for (int64_t k = 0; k < half; ++k) {
            // The pair (i, j) turns by the angle of entry k.
            int64_t i = interleaved_ ? 2 * k : k, j = interleaved_ ? 2 * k + 1 : k + half;
            float a = static_cast<float>(N::load(xi[i])), bv = static_cast<float>(N::load(xi[j]));
            yo[i] = N::store(static_cast<typename N::Compute>(a * c[k] - bv * sn[k]));
            yo[j] = N::store(static_cast<typename N::Compute>(bv * c[k] + a * sn[k]));
          }
          for (int64_t i = l.rotary_dim; i < l.head_size; ++i) yo[i] = xi[i];
        }
      });
    });
  }

 private:
  const Tensor& cos_cache(const Inputs& in) const { return need_input(in, microsoft_ ? 2 : 1, "cos_cache"); }
  const Tensor& sin_cache(const Inputs& in) const { return need_input(in, microsoft_ ? 3 : 2, "sin_cache"); }
  const Tensor* positions(const Inputs& in) const {
    if (microsoft_) return &need_input(in, 1, "position_ids");
    return in.size() > 3 && in[3] && in[3]->defined() ? in[3] : nullptr;
  }

  RotaryLayout layout(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor* pos) const {
    RotaryLayout l;
    if (x.rank() != 3 && x.rank() != 4)
      fail("input must be [batch, seq, hidden] or [batch, heads, seq, head_size], got " + shape_str(x.shape()));
    if (cos.shape() != sin.shape())
      fail("cos_cache " + shape_str(cos.shape()) + " and sin_cache " + shape_str(sin.shape()) + " differ in shape");
    if (cos.dtype() != x.dtype() || sin.dtype() != x.dtype())
      fail("cos_cache and sin_cache must have the input's dtype " + std::string(dtype_name(x.dtype())));
    bool per_token = !microsoft_ && !pos;  // ONNX form: caches [B, S, rotary_dim / 2]
    if (cos.rank() != (per_token ? 3u : 2u))
      fail(std::string("cos_cache must have rank ") + (per_token ? "3 ([batch, seq, rotary_dim / 2]) without position_ids" : "2 ([max_position, rotary_dim / 2])") +
           ", got " + shape_str(cos.shape()));
    l.batch = x.dim(0);
    int64_t hidden;
    if (x.rank() == 4) {
      l.heads = x.dim(1);
      l.seq = x.dim(2);
      l.head_size = x.dim(3);
      hidden = l.heads * l.head_size;
      if (num_heads_ > 0 && num_heads_ != l.heads)
        fail("num_heads " + std::to_string(num_heads_) + " differs from the input's " + std::to_string(l.heads) + " heads");
    } else {
      l.seq = x.dim(1);
      hidden = x.dim(2);
      int64_t cache_half = cos.dim(cos.rank() - 1);
      l.head_size = num_heads_ > 0 ? (hidden % num_heads_ == 0 ? hidden / num_heads_ : 0) : 2 * cache_half;
      if (l.head_size <= 0 || hidden % l.head_size != 0)
        fail("hidden size " + std::to_string(hidden) + " is not a multiple of the head size" +
             (num_heads_ > 0 ? " (num_heads " + std::to_string(num_heads_) + ")" : " (2 * cos_cache's last dim)"));
      l.heads = hidden / l.head_size;
    }
    // Without rotary_embedding_dim: the whole head when num_heads fixes it, else what the caches hold.
    l.rotary_dim = rotary_dim_ > 0                      ? rotary_dim_
                   : x.rank() == 3 && num_heads_ > 0 ? l.head_size
                                                      : 2 * cos.dim(cos.rank() - 1);
    if (l.rotary_dim > l.head_size || l.rotary_dim % 2 != 0 || l.rotary_dim <= 0)
      fail("rotary_embedding_dim " + std::to_string(l.rotary_dim) + " must be even and within the head size " +
           std::to_string(l.head_size));
    if (cos.dim(cos.rank() - 1) != l.rotary_dim / 2)
      fail("cos_cache's last dim is " + std::to_string(cos.dim(cos.rank() - 1)) + ", expected rotary_dim / 2 = " +
           std::to_string(l.rotary_dim / 2));
    if (per_token && (cos.dim(0) != l.batch || cos.dim(1) != l.seq))
      fail("cos_cache " + shape_str(cos.shape()) + " must be [batch, seq, rotary_dim / 2] without position_ids");
    if (pos) {
      bool offset = microsoft_ && pos->numel() == 1 && pos->rank() <= 1;
      if (!offset && (pos->rank() != 2 || pos->dim(0) != l.batch || pos->dim(1) != l.seq))
        fail("position_ids of shape " + shape_str(pos->shape()) + " must be [" + std::to_string(l.batch) + ", " +
             std::to_string(l.seq) + "]" + (microsoft_ ? " or one offset" : ""));
    }
    if (x.rank() == 4) {
      l.seq_stride = l.head_size;
      l.head_stride = l.seq * l.head_size;
    } else {
      l.head_stride = l.head_size;
      l.seq_stride = hidden;
    }
    l.batch_stride = l.seq * hidden;
    return l;
  }

  bool microsoft_;
  bool interleaved_;
  int64_t num_heads_;
  int64_t rotary_dim_;
};

}  // namespace

void register_rotary_embedding(Registry& r) {
  r.add({"RotaryEmbedding", "com.microsoft", 1, 1000, 0, kRotaryTypes,
         [](const KernelSpec& s) -> std::unique_ptr<Kernel> { return std::make_unique<RotaryKernel>(s, true); }});
  r.add({"RotaryEmbedding", "", 23, 1000, 0, kRotaryTypes,
         [](const KernelSpec& s) -> std::unique_ptr<Kernel> { return std::make_unique<RotaryKernel>(s, false); }});
}

}  // namespace mminfer::kernels
