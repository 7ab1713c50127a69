// mminfer::Attention: the fused form of MatMul(Q, Kᵀ) → scale → +mask → Softmax → MatMul(·, V)
// built by the attention-fusion pass. Inputs: Q [..., Sq, D], Kᵀ [..., D, Sk], V [..., Sk, Dv],
// optional additive mask broadcastable to [..., Sq, Sk]. Attributes: scale (float), causal (int),
// and perm_q / perm_k / perm_v / perm_out: Transposes the pass absorbed (an input is the tensor
// before its Transpose; the output is written already transposed), so heads are read and
// written in place instead of being copied to and from [B, H, S, D] by separate Transposes.
#include "kernels/cpu/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/registry.h"
#include "kernels/cpu/softmax_simd.h"
#include "kernels/cpu/vector_math.h"

namespace mminfer::kernels {

namespace attention {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Turns one row of raw scores into probabilities in place (scale, mask, causal cut, softmax).
void softmax_row(float* s, const float* mask, int64_t sk, int64_t visible, float scale) {
  float m = kNegInf;
  for (int64_t j = 0; j < sk; ++j) {
    float x = j < visible ? s[j] * scale + (mask ? mask[j] : 0.f) : kNegInf;
    s[j] = x;
    if (x > m || std::isnan(x)) m = x;
    if (std::isnan(m)) break;
  }
  if (std::isnan(m)) {
    for (int64_t j = 0; j < sk; ++j) s[j] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  if (m == kNegInf) {  // nothing visible: a tie between every key
    for (int64_t j = 0; j < sk; ++j) s[j] = 1.f / static_cast<float>(sk);
    return;
  }
  if (m == -kNegInf) {  // +inf scores share the mass
    int64_t count = 0;
    for (int64_t j = 0; j < sk; ++j) count += s[j] == m;
    for (int64_t j = 0; j < sk; ++j) s[j] = s[j] == m ? 1.f / static_cast<float>(count) : 0.f;
    return;
  }
  float sum = 0.f;
  for (int64_t j = 0; j < sk; ++j) {
    s[j] = vmath::exp_scalar(s[j] - m);
    sum += s[j];
  }
  float inv = 1.f / sum;
  for (int64_t j = 0; j < sk; ++j) s[j] *= inv;
}

int64_t visible_keys(const Problem& p, int64_t i) {
  if (!p.causal) return p.sk;
  int64_t v = i + (p.sk - p.sq) + 1;
  return v < 0 ? 0 : (v > p.sk ? p.sk : v);
}

const float* mask_row(const Problem& p, int64_t i) { return p.mask ? p.mask + i * p.mask_row_stride : nullptr; }

}  // namespace

void run_reference(const Problem& p) {
  std::vector<float> s(static_cast<size_t>(p.sk));
  for (int64_t i = 0; i < p.sq; ++i) {
    for (int64_t j = 0; j < p.sk; ++j) {
      float acc = 0.f;
      for (int64_t c = 0; c < p.d; ++c) acc += p.q[i * p.q_stride + c] * p.kt[c * p.kt_stride + j];
      s[j] = acc;
    }
    softmax_row(s.data(), mask_row(p, i), p.sk, visible_keys(p, i), p.scale);
    for (int64_t c = 0; c < p.dv; ++c) {
      float acc = 0.f;
      for (int64_t j = 0; j < p.sk; ++j) acc += s[j] * p.v[j * p.v_stride + c];
      p.out[i * p.out_stride + c] = acc;
    }
  }
}

namespace {

// Raw scores → logits in place: scale, add the mask row, and hide keys past `visible` (causal).
void prepare_row(float* s, const float* mask, int64_t sk, int64_t visible, float scale) {
  const __m256 vs = _mm256_set1_ps(scale);
  if (mask)
    for (int64_t j = 0; j < visible; j += 8) {
      __m256i m = vmath::tail_mask(std::min<int64_t>(8, visible - j));
      __m256 x = _mm256_fmadd_ps(_mm256_maskload_ps(s + j, m), vs, _mm256_maskload_ps(mask + j, m));
      _mm256_maskstore_ps(s + j, m, x);
    }
  else
    vmath::map_avx2(s, s, visible, [&](__m256 x) { return _mm256_mul_ps(x, vs); });
  for (int64_t j = visible; j < sk; ++j) s[j] = kNegInf;
}

// Loads 16 floats (two vectors) of which the first `w` are real; the rest read as 0.
struct Pair {
  __m256i m0, m1;
  bool full;
  explicit Pair(int64_t w)
      : m0(vmath::tail_mask(std::min<int64_t>(w, 8))), m1(vmath::tail_mask(std::max<int64_t>(w - 8, 0))), full(w >= 16) {}
  __m256 lo(const float* p) const { return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m0); }
  __m256 hi(const float* p) const { return full ? _mm256_loadu_ps(p + 8) : _mm256_maskload_ps(p + 8, m1); }
  void store(float* p, __m256 a, __m256 b) const {
    if (full) {
      _mm256_storeu_ps(p, a);
      _mm256_storeu_ps(p + 8, b);
    } else {
      _mm256_maskstore_ps(p, m0, a);
      _mm256_maskstore_ps(p + 8, m1, b);
    }
  }
};

// S[r][j] = Σ_c Q[i0+r][c]·Kᵀ[c][j] for R query rows and keys [0, keys), 16 keys per step.
template <int R>
void scores_tile(const Problem& p, int64_t i0, int64_t keys, float* s) {
  for (int64_t j = 0; j < keys; j += 16) {
    Pair io(keys - j);
    __m256 a[R], b[R];
    for (int r = 0; r < R; ++r) a[r] = b[r] = _mm256_setzero_ps();
    const float* q = p.q + i0 * p.q_stride;
    for (int64_t c = 0; c < p.d; ++c) {
      const float* kr = p.kt + c * p.kt_stride + j;
      __m256 k0 = io.lo(kr), k1 = io.hi(kr);
      for (int r = 0; r < R; ++r) {
        __m256 qv = _mm256_set1_ps(q[r * p.q_stride + c]);
        a[r] = _mm256_fmadd_ps(qv, k0, a[r]);
        b[r] = _mm256_fmadd_ps(qv, k1, b[r]);
      }
    }
    for (int r = 0; r < R; ++r) io.store(s + r * p.sk + j, a[r], b[r]);
  }
}

// out[i0+r][:] = Σ_{j < keys} P[r][j]·V[j][:] for R rows, 16 output columns per step.
template <int R>
void values_tile(const Problem& p, int64_t i0, int64_t keys, const float* s) {
  for (int64_t c = 0; c < p.dv; c += 16) {
    Pair io(p.dv - c);
    __m256 a[R], b[R];
    for (int r = 0; r < R; ++r) a[r] = b[r] = _mm256_setzero_ps();
    for (int64_t j = 0; j < keys; ++j) {
      const float* vr = p.v + j * p.v_stride + c;
      __m256 v0 = io.lo(vr), v1 = io.hi(vr);
      for (int r = 0; r < R; ++r) {
        __m256 pv = _mm256_set1_ps(s[r * p.sk + j]);
        a[r] = _mm256_fmadd_ps(pv, v0, a[r]);
        b[r] = _mm256_fmadd_ps(pv, v1, b[r]);
      }
    }
    for (int r = 0; r < R; ++r) io.store(p.out + (i0 + r) * p.out_stride + c, a[r], b[r]);
  }
}

template <int R>
void block(const Problem& p, int64_t i0, float* s) {
  // Keys no row of the block can see need no scores; a row that sees none averages all keys.
  int64_t seen = 0, used = 0;
  for (int r = 0; r < R; ++r) {
    int64_t v = visible_keys(p, i0 + r);
    seen = std::max(seen, v);
    used = std::max(used, v == 0 ? p.sk : v);
  }
  scores_tile<R>(p, i0, seen, s);
  for (int r = 0; r < R; ++r) {
    float* row = s + r * p.sk;
    prepare_row(row, mask_row(p, i0 + r), p.sk, visible_keys(p, i0 + r), p.scale);
    softmax_simd::row_avx2(row, row, p.sk, false);
  }
  values_tile<R>(p, i0, used, s);
}

}  // namespace

void run_avx2(const Problem& p, float* scratch) {
  int64_t i0 = 0;
  for (; i0 + kBlockRows <= p.sq; i0 += kBlockRows) block<kBlockRows>(p, i0, scratch);
  switch (p.sq - i0) {
    case 5: block<5>(p, i0, scratch); break;
    case 4: block<4>(p, i0, scratch); break;
    case 3: block<3>(p, i0, scratch); break;
    case 2: block<2>(p, i0, scratch); break;
    case 1: block<1>(p, i0, scratch); break;
    default: break;
  }
}

}  // namespace attention

namespace {

// Strides of `t` (rank r) broadcast to `rank` dims: leading missing dims and size-1 dims get 0.
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

std::vector<int64_t> contiguous_strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t k = s.size(); k-- > 1;) st[k - 1] = st[k] * s[k];
  return st;
}

// A tensor seen through a Transpose the fusion pass absorbed: logical dim k is physical dim perm[k].
struct View {
  Shape shape;                  // logical
  std::vector<int64_t> stride;  // element stride per logical dim
};

View permuted(const Shape& physical, const std::vector<int64_t>& perm) {
  View v;
  std::vector<int64_t> st = contiguous_strides(physical);
  for (int64_t p : perm) {
    v.shape.push_back(physical[static_cast<size_t>(p)]);
    v.stride.push_back(st[static_cast<size_t>(p)]);
  }
  return v;
}

// Copies a [rows, cols] block with arbitrary strides into contiguous `dst`.
void gather_block(const float* src, int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride, float* dst) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[i * cols + j] = src[i * row_stride + j * col_stride];
}

class AttentionKernel final : public Kernel {
 public:
  explicit AttentionKernel(const KernelSpec& spec) {
    scale_ = spec.a().get_float("scale", 1.f);
    causal_ = spec.a().get_int("causal", 0) != 0;
    const char* names[4] = {"perm_q", "perm_k", "perm_v", "perm_out"};
    for (int i = 0; i < 4; ++i) perm_[i] = spec.a().get_ints(names[i]);
  }

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& q = need_input(in, 0, "Q");
    const Tensor& kt = need_input(in, 1, "K transposed");
    const Tensor& v = need_input(in, 2, "V");
    for (const Tensor* t : {&q, &kt, &v})
      if (t->dtype() != DType::kFloat32) fail("Attention computes in float32 only");
    size_t r = q.rank();
    if (r < 2 || kt.rank() != r || v.rank() != r) fail("Q, Kᵀ and V must have the same rank (at least 2)");
    for (int i = 0; i < 4; ++i) check_perm(perm_[i], r);
    Shape qs = view(0, q.shape()).shape, ks = view(1, kt.shape()).shape, vs = view(2, v.shape()).shape;
    for (size_t d = 0; d + 2 < r; ++d)
      if (ks[d] != qs[d] || vs[d] != qs[d]) fail("Q, Kᵀ and V disagree on batch dimensions");
    if (ks[r - 2] != qs[r - 1]) fail("Q's depth " + std::to_string(qs[r - 1]) + " differs from Kᵀ's " + std::to_string(ks[r - 2]));
    if (vs[r - 2] != ks[r - 1]) fail("V has " + std::to_string(vs[r - 2]) + " keys, Kᵀ has " + std::to_string(ks[r - 1]));
    if (in.size() > 3 && in[3]) {
      const Tensor& m = *in[3];
      if (m.dtype() != DType::kFloat32) fail("the attention mask must be float32");
      if (m.rank() > r) fail("the attention mask has a higher rank than the scores");
      Shape scores = qs;
      scores[r - 1] = ks[r - 1];
      for (size_t k = 0; k < m.rank(); ++k) {
        int64_t md = m.dim(m.rank() - 1 - k), sd = scores[r - 1 - k];
        if (md != 1 && md != sd) fail("the attention mask " + shape_str(m.shape()) + " does not broadcast to " + shape_str(scores));
      }
    }
    Shape os = qs;
    os[r - 1] = vs[r - 1];
    out[0] = {DType::kFloat32, physical_out(os)};
  }

  void run(const Inputs& in, Outputs& out) override {
    const Tensor &q = *in[0], &kt = *in[1], &v = *in[2];
    const Tensor* mask = in.size() > 3 ? in[3] : nullptr;
    size_t r = q.rank();
    View qv = view(0, q.shape()), kv = view(1, kt.shape()), vv = view(2, v.shape());
    int64_t sq = qv.shape[r - 2], d = qv.shape[r - 1], sk = kv.shape[r - 1], dv = vv.shape[r - 1];
    Shape os = qv.shape;
    os[r - 1] = dv;
    Tensor& o = *out[0];
    // The output's logical [.., Sq, Dv] strides inside the physical (possibly transposed) result.
    View ov;
    {
      std::vector<int64_t> inv(r), pst = contiguous_strides(o.shape());
      const std::vector<int64_t>& po = perm_[3];
      for (size_t k = 0; k < r; ++k) inv[po.empty() ? k : static_cast<size_t>(po[k])] = static_cast<int64_t>(k);
      ov.shape = os;
      for (size_t m = 0; m < r; ++m) ov.stride.push_back(pst[static_cast<size_t>(inv[m])]);
    }
    std::vector<int64_t> mstride;
    if (mask) mstride = broadcast_strides(mask->shape(), r);
    Shape batch_shape(os.begin(), os.end() - 2);
    int64_t batch = shape_numel(batch_shape);
    // The tile kernel reads rows with unit inner stride and Kᵀ with unit key stride; other
    // layouts are packed per (batch, head) into scratch, which stays in cache.
    bool pack_q = qv.stride[r - 1] != 1, pack_k = kv.stride[r - 1] != 1, pack_v = vv.stride[r - 1] != 1;
    bool pack_o = ov.stride[r - 1] != 1, pack_m = mask && mstride[r - 1] == 0 && sk > 1;
    parallel_for(batch, 1, [&](int64_t b0, int64_t b1) {
      std::vector<float> scratch(static_cast<size_t>(attention::kBlockRows * sk));
      std::vector<float> qbuf(pack_q ? sq * d : 0), kbuf(pack_k ? d * sk : 0), vbuf(pack_v ? sk * dv : 0);
      std::vector<float> obuf(pack_o ? sq * dv : 0), mbuf(pack_m ? sq * sk : 0);
      for (int64_t b = b0; b < b1; ++b) {
        int64_t oq = 0, ok = 0, ovv = 0, oo = 0, om = 0, rem = b;
        for (size_t k = batch_shape.size(); k-- > 0;) {
          int64_t i = rem % batch_shape[k];
          rem /= batch_shape[k];
          oq += i * qv.stride[k], ok += i * kv.stride[k], ovv += i * vv.stride[k], oo += i * ov.stride[k];
          if (mask) om += i * mstride[k];
        }
        attention::Problem p{};
        p.sq = sq, p.sk = sk, p.d = d, p.dv = dv;
        p.scale = scale_;
        p.causal = causal_;
        p.q = q.data<float>() + oq, p.q_stride = qv.stride[r - 2];
        if (pack_q) {
          gather_block(p.q, sq, d, qv.stride[r - 2], qv.stride[r - 1], qbuf.data());
          p.q = qbuf.data(), p.q_stride = d;
        }
        p.kt = kt.data<float>() + ok, p.kt_stride = kv.stride[r - 2];
        if (pack_k) {
          gather_block(p.kt, d, sk, kv.stride[r - 2], kv.stride[r - 1], kbuf.data());
          p.kt = kbuf.data(), p.kt_stride = sk;
        }
        p.v = v.data<float>() + ovv, p.v_stride = vv.stride[r - 2];
        if (pack_v) {
          gather_block(p.v, sk, dv, vv.stride[r - 2], vv.stride[r - 1], vbuf.data());
          p.v = vbuf.data(), p.v_stride = dv;
        }
        float* dst = o.data<float>() + oo;
        p.out = pack_o ? obuf.data() : dst;
        p.out_stride = pack_o ? dv : ov.stride[r - 2];
        if (mask) {
          p.mask = mask->data<float>() + om;
          p.mask_row_stride = mstride[r - 2];
          if (pack_m) {  // one value per query row, broadcast along the keys
            for (int64_t i = 0; i < sq; ++i) std::fill_n(mbuf.data() + i * sk, sk, p.mask[i * p.mask_row_stride]);
            p.mask = mbuf.data(), p.mask_row_stride = sk;
          }
        }
        if (sk == 0) {
          for (int64_t i = 0; i < sq; ++i) std::fill_n(p.out + i * p.out_stride, dv, 0.f);
        } else {
          attention::run_avx2(p, scratch.data());
        }
        if (pack_o)
          for (int64_t i = 0; i < sq; ++i)
            for (int64_t c = 0; c < dv; ++c) dst[i * ov.stride[r - 2] + c * ov.stride[r - 1]] = obuf[i * dv + c];
      }
    });
  }

 private:
  static void check_perm(const std::vector<int64_t>& perm, size_t rank) {
    if (perm.empty()) return;
    std::vector<bool> seen(rank, false);
    bool ok = perm.size() == rank;
    for (int64_t p : perm) {
      ok = ok && p >= 0 && p < static_cast<int64_t>(rank) && !seen[static_cast<size_t>(p)];
      if (ok) seen[static_cast<size_t>(p)] = true;
    }
    if (!ok) fail("an absorbed permutation does not match the rank " + std::to_string(rank));
  }
  View view(int i, const Shape& physical) const {
    if (!perm_[i].empty()) return permuted(physical, perm_[i]);
    return View{physical, contiguous_strides(physical)};
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
};

}  // namespace

void register_attention(Registry& r) {
  r.add({"Attention", "mminfer", 1, 1000, 0, {DType::kFloat32},
         [](const KernelSpec& s) { return std::make_unique<AttentionKernel>(s); }});
}

}  // namespace mminfer::kernels
