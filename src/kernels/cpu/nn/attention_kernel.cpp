// mminfer::Attention: the fused form of MatMul(Q, Kᵀ) → scale → +mask → Softmax → MatMul(·, V)
// built by the attention passes. Inputs: Q [..., Sq, D], Kᵀ [..., D, Sk], V [..., Sk, Dv], optional
// additive mask broadcastable to [..., Sq, Sk]. Attributes:
//   scale, causal;
//   perm_q / perm_k / perm_v / perm_out: Transposes absorbed by the pass. An input is the tensor
//     before its Transpose; the output is written already transposed. Heads are read and written
//     in place instead of being copied to and from [B, H, S, D].
//   packed = [Nq, Nk, Nv], allowzero = [..]: Q, K and V come from one GEMM. Input 0 is its output
//     P [..., Nq+Nk+Nv], inputs 1 and 2 are empty, inputs 4-6 are the Reshape targets each slice
//     went through; each operand is read straight out of P.
#include <immintrin.h>

#include <algorithm>

#include "core/cpu_features.h"
#include "core/parallel.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/nn/attention.h"
#include "kernels/cpu/tensor/reshape_target.h"

namespace mminfer::kernels {

namespace {

std::vector<int64_t> contiguous_strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t k = s.size(); k-- > 1;) st[k - 1] = st[k] * s[k];
  return st;
}

// Strides of `shape` broadcast to `rank` dims: leading missing dims and size-1 dims get 0.
std::vector<int64_t> broadcast_strides(const Shape& shape, size_t rank) {
  std::vector<int64_t> st(rank, 0);
  int64_t acc = 1;
  for (size_t k = 0; k < shape.size(); ++k) {
    size_t src = shape.size() - 1 - k, dst = rank - 1 - k;
    st[dst] = shape[src] == 1 ? 0 : acc;
    acc *= shape[src];
  }
  return st;
}

// An operand as the attention math sees it: logical shape and element strides over `data`.
struct Operand {
  const float* data = nullptr;
  Shape shape;
  std::vector<int64_t> stride;
  std::vector<float> own;  // a copy, when the operand cannot be described by strides

  void permute(const std::vector<int64_t>& perm) {
    if (perm.empty()) return;
    Shape s;
    std::vector<int64_t> st;
    for (int64_t p : perm) s.push_back(shape[static_cast<size_t>(p)]), st.push_back(stride[static_cast<size_t>(p)]);
    shape = std::move(s), stride = std::move(st);
  }
};

// dst[8 x 8 at (i, j), row length `cols`] = the transpose of the 8 x 8 source block whose
// rows (along j) are `col_stride` apart and contiguous along i.
void transpose_8x8(const float* src, int64_t col_stride, float* dst, int64_t cols) {
  __m256 r[8];
  for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(src + k * col_stride);
  __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  __m256 o[8] = {_mm256_permute2f128_ps(s0, s4, 0x20), _mm256_permute2f128_ps(s1, s5, 0x20),
                 _mm256_permute2f128_ps(s2, s6, 0x20), _mm256_permute2f128_ps(s3, s7, 0x20),
                 _mm256_permute2f128_ps(s0, s4, 0x31), _mm256_permute2f128_ps(s1, s5, 0x31),
                 _mm256_permute2f128_ps(s2, s6, 0x31), _mm256_permute2f128_ps(s3, s7, 0x31)};
  for (int k = 0; k < 8; ++k) _mm256_storeu_ps(dst + k * cols, o[k]);
}

// Copies a [rows, cols] block with arbitrary strides into contiguous `dst`. Contiguous source
// rows copy whole; contiguous source columns (Kᵀ read from K rows) go through 8x8 transposes.
void gather_block(const float* src, int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride, float* dst) {
  if (col_stride == 1) {
    for (int64_t i = 0; i < rows; ++i) std::copy_n(src + i * row_stride, cols, dst + i * cols);
    return;
  }
  int64_t i0 = 0, j0 = 0;
  if (row_stride == 1) {
    for (; i0 + 8 <= rows; i0 += 8)
      for (int64_t j = 0; j + 8 <= cols; j += 8) transpose_8x8(src + i0 + j * col_stride, col_stride, dst + i0 * cols + j, cols);
    j0 = cols / 8 * 8;
  }
  // What the 8x8 blocks did not cover: the bottom rows, and the right columns above them.
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = i < i0 ? j0 : 0; j < cols; ++j) dst[i * cols + j] = src[i * row_stride + j * col_stride];
}

void check_perm(const std::vector<int64_t>& perm, size_t rank) {
  if (perm.empty()) return;
  std::vector<bool> seen(rank, false);
  bool ok = perm.size() == rank;
  for (int64_t p : perm) {
    ok = ok && p >= 0 && p < static_cast<int64_t>(rank) && !seen[static_cast<size_t>(p)];
    if (ok) seen[static_cast<size_t>(p)] = true;
  }
  if (!ok) fail("an absorbed permutation does not match the rank " + std::to_string(rank));
}

class AttentionKernel final : public Kernel {
 public:
  explicit AttentionKernel(const KernelSpec& spec) {
    scale_ = spec.a().get_float("scale", 1.f);
    causal_ = spec.a().get_int("causal", 0) != 0;
    const char* names[4] = {"perm_q", "perm_k", "perm_v", "perm_out"};
    for (int i = 0; i < 4; ++i) perm_[i] = spec.a().get_ints(names[i]);
    packed_ = spec.a().get_ints("packed");
    allowzero_ = spec.a().get_ints("allowzero");
    if (!packed_.empty() && packed_.size() != 3) fail("packed must give three widths");
    for (int64_t w : packed_)
      if (w <= 0) fail("packed widths must be positive");
  }

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    Operand q = operand(in, 0, false), kt = operand(in, 1, false), v = operand(in, 2, false);
    size_t r = q.shape.size();
    if (r < 2 || kt.shape.size() != r || v.shape.size() != r) fail("Q, Kᵀ and V must have the same rank (at least 2)");
    check_perm(perm_[3], r);
    const Shape &qs = q.shape, &ks = kt.shape, &vs = v.shape;
    // K and V may broadcast over batch dimensions (as MatMul's do): the beams of one input share
    // its cross-attention keys and values.
    for (size_t d = 0; d + 2 < r; ++d)
      if ((ks[d] != qs[d] && ks[d] != 1) || (vs[d] != qs[d] && vs[d] != 1)) fail("Q, Kᵀ and V disagree on batch dimensions");
    if (ks[r - 2] != qs[r - 1]) fail("Q's depth " + std::to_string(qs[r - 1]) + " differs from Kᵀ's " + std::to_string(ks[r - 2]));
    if (vs[r - 2] != ks[r - 1]) fail("V has " + std::to_string(vs[r - 2]) + " keys, Kᵀ has " + std::to_string(ks[r - 1]));
    if (const Tensor* m = mask(in)) {
      if (m->dtype() != DType::kFloat32) fail("the attention mask must be float32");
      if (m->rank() > r) fail("the attention mask has a higher rank than the scores");
      Shape scores = qs;
      scores[r - 1] = ks[r - 1];
      for (size_t k = 0; k < m->rank(); ++k) {
        int64_t md = m->dim(m->rank() - 1 - k), sd = scores[r - 1 - k];
        if (md != 1 && md != sd) fail("the attention mask " + shape_str(m->shape()) + " does not broadcast to " + shape_str(scores));
      }
    }
    Shape os = qs;
    os[r - 1] = vs[r - 1];
    out[0] = {DType::kFloat32, physical_out(os)};
  }

  void run(const Inputs& in, Outputs& out) override {
    Operand q = operand(in, 0, true), kv = operand(in, 1, true), vv = operand(in, 2, true);
    const Tensor* mask_t = mask(in);
    size_t r = q.shape.size();
    int64_t sq = q.shape[r - 2], d = q.shape[r - 1], sk = kv.shape[r - 1], dv = vv.shape[r - 1];
    Shape os = q.shape;
    os[r - 1] = dv;
    Tensor& o = *out[0];
    Operand ov = output_view(o, os);
    std::vector<int64_t> mstride;
    if (mask_t) mstride = broadcast_strides(mask_t->shape(), r);
    for (size_t k = 0; k + 2 < r; ++k) {
      if (kv.shape[k] != q.shape[k]) kv.stride[k] = 0;  // broadcast
      if (vv.shape[k] != q.shape[k]) vv.stride[k] = 0;
    }
    const bool avx512 = cpu_features().avx512f;
    // One query row per problem against keys and values shared along the first batch dimension
    // (beams decoding against one input's encoder states): those rows become one problem's query
    // rows, so each key is read once for all of them.
    const size_t lead = sq == 1 && r >= 3 && q.shape[0] > 1 && kv.stride[0] == 0 && vv.stride[0] == 0 && !mask_t && !causal_;
    const int64_t rows = lead ? q.shape[0] : sq;
    const int64_t q_row_stride = lead ? q.stride[0] : q.stride[r - 2], o_row_stride = lead ? ov.stride[0] : ov.stride[r - 2];
    Shape batch_shape(os.begin() + static_cast<int64_t>(lead), os.end() - 2);
    int64_t batch = shape_numel(batch_shape);
    // The tile kernel reads rows with unit inner stride and Kᵀ with unit key stride; other
    // layouts are packed per (batch, head) into scratch, which stays in cache. The 512-bit tiles
    // read K as rows in place for a single query row (greedy decoding) instead; from two rows on
    // (beams folded together) packing once and the row tiles were faster (1,500 keys, from DRAM).
    const bool k_rows = avx512 && kv.stride[r - 1] != 1 && kv.stride[r - 2] == 1 && rows <= attention::kBlockRows;
    bool pack_q = q.stride[r - 1] != 1, pack_k = kv.stride[r - 1] != 1 && !k_rows, pack_v = vv.stride[r - 1] != 1;
    bool pack_o = ov.stride[r - 1] != 1, pack_m = mask_t && mstride[r - 1] == 0 && sk > 1;
    parallel_for(batch, 1, [&](int64_t b0, int64_t b1) {
      std::vector<float> scratch(static_cast<size_t>(attention::kBlockRows * sk));
      std::vector<float> qbuf(pack_q ? rows * d : 0), kbuf(pack_k ? d * sk : 0), vbuf(pack_v ? sk * dv : 0);
      std::vector<float> obuf(pack_o ? rows * dv : 0), mbuf(pack_m ? sq * sk : 0);
      for (int64_t b = b0; b < b1; ++b) {
        int64_t oq = 0, ok = 0, ovv = 0, oo = 0, om = 0, rem = b;
        for (size_t bk = batch_shape.size(); bk-- > 0;) {
          size_t k = bk + lead;
          int64_t i = rem % batch_shape[bk];
          rem /= batch_shape[bk];
          oq += i * q.stride[k], ok += i * kv.stride[k], ovv += i * vv.stride[k], oo += i * ov.stride[k];
          if (mask_t) om += i * mstride[k];
        }
        attention::Problem p{};
        p.sq = rows, p.sk = sk, p.d = d, p.dv = dv;
        p.scale = scale_;
        p.causal = causal_;
        p.q = q.data + oq, p.q_stride = q_row_stride;
        if (pack_q) {
          gather_block(p.q, rows, d, q_row_stride, q.stride[r - 1], qbuf.data());
          p.q = qbuf.data(), p.q_stride = d;
        }
        p.kt = kv.data + ok, p.kt_stride = kv.stride[r - 2];
        if (k_rows) p.k_rows = true, p.kt_stride = kv.stride[r - 1];
        if (pack_k) {
          gather_block(p.kt, d, sk, kv.stride[r - 2], kv.stride[r - 1], kbuf.data());
          p.kt = kbuf.data(), p.kt_stride = sk;
        }
        p.v = vv.data + ovv, p.v_stride = vv.stride[r - 2];
        if (pack_v) {
          gather_block(p.v, sk, dv, vv.stride[r - 2], vv.stride[r - 1], vbuf.data());
          p.v = vbuf.data(), p.v_stride = dv;
        }
        float* dst = const_cast<float*>(ov.data) + oo;
        p.out = pack_o ? obuf.data() : dst;
        p.out_stride = pack_o ? dv : o_row_stride;
        if (mask_t) {
          p.mask = mask_t->data<float>() + om;
          p.mask_row_stride = mstride[r - 2];
          if (pack_m) {  // one value per query row, broadcast along the keys
            for (int64_t i = 0; i < sq; ++i) std::fill_n(mbuf.data() + i * sk, sk, p.mask[i * p.mask_row_stride]);
            p.mask = mbuf.data(), p.mask_row_stride = sk;
          }
        }
        if (sk == 0) {
          for (int64_t i = 0; i < rows; ++i) std::fill_n(p.out + i * p.out_stride, dv, 0.f);
        } else {
          if (avx512 && attention::blocked_applies(p)) attention::run_blocked_avx512(p, scratch.data());
          else if (avx512) attention::run_avx512(p, scratch.data());
          else attention::run_avx2(p, scratch.data());
        }
        if (pack_o)
          for (int64_t i = 0; i < rows; ++i)
            for (int64_t c = 0; c < dv; ++c) dst[i * o_row_stride + c * ov.stride[r - 1]] = obuf[i * dv + c];
      }
    });
  }

 private:
  const Tensor* mask(const Inputs& in) const { return in.size() > 3 ? in[3] : nullptr; }

  // Operand i (0 Q, 1 Kᵀ, 2 V) seen through its absorbed Reshape (packed) and Transpose.
  // With `data`, also points it at the bytes (copying only when strides cannot describe it).
  Operand operand(const Inputs& in, int i, bool data) const {
    Operand op;
    if (packed_.empty()) {
      const Tensor& t = need_input(in, i, i == 0 ? "Q" : i == 1 ? "K transposed" : "V");
      if (t.dtype() != DType::kFloat32) fail("Attention computes in float32 only");
      op.shape = t.shape();
      op.stride = contiguous_strides(op.shape);
      if (data) op.data = t.data<float>();
    } else {
      packed_operand(in, i, data, op);
    }
    check_perm(perm_[i], op.shape.size());
    op.permute(perm_[i]);
    return op;
  }

  // Slice i of P's last axis, reshaped: [rows, N_i] with rows N_total apart, then the Reshape.
  void packed_operand(const Inputs& in, int i, bool data, Operand& op) const {
    const Tensor& p = need_input(in, 0, "the packed Q/K/V");
    if (p.dtype() != DType::kFloat32) fail("Attention computes in float32 only");
    int64_t total = packed_[0] + packed_[1] + packed_[2], width = packed_[static_cast<size_t>(i)];
    if (p.rank() < 1 || p.dim(p.rank() - 1) != total)
      fail("the packed Q/K/V must end in " + std::to_string(total) + " values, got " + shape_str(p.shape()));
    const Tensor& target = need_input(in, 4 + i, "a Reshape target");
    if (target.dtype() != DType::kInt64 || target.rank() != 1) fail("a Reshape target must be 1-D int64");
    Shape slice = p.shape();
    slice.back() = width;
    bool allowzero = static_cast<size_t>(i) < allowzero_.size() && allowzero_[static_cast<size_t>(i)] != 0;
    op.shape = reshape_target(slice, std::vector<int64_t>(target.data<int64_t>(), target.data<int64_t>() + target.numel()),
                              allowzero);
    int64_t offset = 0;
    for (int k = 0; k < i; ++k) offset += packed_[static_cast<size_t>(k)];
    // The trailing dims that multiply to N_i live inside one row of P; the leading ones step by rows.
    size_t split = op.shape.size();
    int64_t acc = 1;
    while (split > 0 && acc < width) acc *= op.shape[--split];
    bool strided = acc == width;
    op.stride.assign(op.shape.size(), 1);
    if (strided) {
      int64_t s = 1;
      for (size_t k = op.shape.size(); k-- > split;) op.stride[k] = s, s *= op.shape[k];
      s = total;
      for (size_t k = split; k-- > 0;) op.stride[k] = s, s *= op.shape[k];
      if (data) op.data = p.data<float>() + offset;
      return;
    }
    op.stride = contiguous_strides(op.shape);
    if (!data) return;
    int64_t rows = p.numel() / total;
    op.own.resize(static_cast<size_t>(rows * width));
    gather_block(p.data<float>() + offset, rows, width, total, 1, op.own.data());
    op.data = op.own.data();
  }

  // The logical [.., Sq, Dv] result inside the physical (possibly transposed) output tensor.
  Operand output_view(Tensor& o, const Shape& logical) const {
    Operand v;
    v.data = o.data<float>();
    v.shape = logical;
    std::vector<int64_t> pst = contiguous_strides(o.shape());
    size_t r = logical.size();
    v.stride.assign(r, 0);
    for (size_t k = 0; k < r; ++k) v.stride[perm_[3].empty() ? k : static_cast<size_t>(perm_[3][k])] = pst[k];
    return v;
  }

  Shape physical_out(const Shape& logical) const {
    if (perm_[3].empty()) return logical;
    Shape s;
    for (int64_t p : perm_[3]) s.push_back(logical[static_cast<size_t>(p)]);
    return s;
  }

  float scale_ = 1.f;
  bool causal_ = false;
  std::vector<int64_t> perm_[4];  // Transposes absorbed on Q, Kᵀ, V (inputs) and on the output
  std::vector<int64_t> packed_, allowzero_;
};

}  // namespace

void register_attention(Registry& r) {
  r.add({"Attention", "mminfer", 1, 1000, 0, {DType::kFloat32},
         [](const KernelSpec& s) { return std::make_unique<AttentionKernel>(s); }},
        {.foldable = false, .heavy = true});
}

}  // namespace mminfer::kernels
