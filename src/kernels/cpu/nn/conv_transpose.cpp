// ConvTranspose on oneDNN deconvolution. Padding that oneDNN cannot express (negative, from
// output_padding or a large output_shape) is handled by running with the padding clamped at zero
// and then cropping/extending into the output; positions no input reaches hold the bias.
// Non-overlapping upsampling (stride == kernel) takes the GEMM path in conv_transpose_tiles.h.
#include <map>
#include <memory>
#include <mutex>

#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/gemm/dnnl_util.h"
#include "kernels/cpu/math/matmul_common.h"
#include "kernels/cpu/nn/conv_common.h"
#include "kernels/cpu/nn/conv_transpose_tiles.h"

namespace mminfer::kernels {

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

dnnl::memory::dims to_dims(const std::vector<int64_t>& v) { return dnnl::memory::dims(v.begin(), v.end()); }

// Our W is [C, OC/G, k...] = (g, i, o, k...) in memory; oneDNN wants logical (g, o, i, k...).
dnnl::memory::desc deconv_weights_desc(const Shape& w, int64_t G) {
  int64_t cg = w[0] / G, og = w[1], ks = 1;
  for (size_t i = 2; i < w.size(); ++i) ks *= w[i];
  dnnl::memory::dims dims, strides;
  if (G > 1) {
    dims.push_back(G);
    strides.push_back(cg * og * ks);
  }
  dims.push_back(og);
  strides.push_back(ks);
  dims.push_back(cg);
  strides.push_back(og * ks);
  int64_t s = ks;
  for (size_t i = 2; i < w.size(); ++i) {
    s /= w[i];
    dims.push_back(w[i]);
    strides.push_back(s);
  }
  return dnnl::memory::desc(dims, dt::f32, strides);
}

class ConvTransposeKernel : public Kernel {
 public:
  bool runs_onednn() const override { return true; }
  explicit ConvTransposeKernel(const KernelSpec& spec) {
    attrs_ = read_conv_attrs(spec.a());
    const Tensor* w = spec.constant_inputs.size() > 1 ? spec.constant_inputs[1] : nullptr;
    if (w && w->dtype() == DType::kFloat32) const_w_ = w;
  }

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "X");
    const Tensor& w = need_input(in, 1, "W");
    if (x.dtype() != w.dtype()) fail(std::string("X and W dtypes differ: ") + dtype_name(x.dtype()) + " vs " + dtype_name(w.dtype()));
    ConvGeometry g = conv_transpose_geometry(attrs_, x.shape(), w.shape());
    check_conv_bias(in, x, g.OC);
    out[0] = {x.dtype(), g.out_shape};
  }

  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    const Tensor& w = *in[1];
    const Tensor* b = in.size() > 2 ? in[2] : nullptr;
    Tensor& y = *out[0];
    ConvGeometry g = conv_transpose_geometry(attrs_, x.shape(), w.shape());
    if (y.numel() == 0) return;
    if (x.dtype() == DType::kFloat32) {
      run_f32(g, x.data<float>(), w, b ? b->data<float>() : nullptr, y.data<float>(), true);
      return;
    }
    std::vector<float> xf = to_f32(x), wf = to_f32(w), bf = b ? to_f32(*b) : std::vector<float>();
    std::vector<float> yf(static_cast<size_t>(y.numel()));
    Tensor wt = Tensor::view(DType::kFloat32, w.shape(), wf.data());
    run_f32(g, xf.data(), wt, b ? bf.data() : nullptr, yf.data(), false);
    from_f32(yf.data(), y);
  }

 private:
  struct Plan {
    dnnl::deconvolution_forward prim;
    dnnl::memory::desc src_md, dst_md, w_md;
    dnnl::memory packed_w;
    Shape full_shape;  // what the primitive produces; differs from the output when cropping
  };

  Plan& plan_for(const ConvGeometry& g, const Shape& w_shape, bool has_bias, bool use_const) {
    std::vector<int64_t> key = {g.N, g.C, has_bias, use_const};
    key.insert(key.end(), g.in.begin(), g.in.end());
    key.insert(key.end(), w_shape.begin(), w_shape.end());
    key.insert(key.end(), g.out.begin(), g.out.end());
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
    if (plans_.size() >= 32) plans_.erase(plans_.begin());
    size_t s = g.in.size();
    Shape xs = {g.N, g.C};
    xs.insert(xs.end(), g.in.begin(), g.in.end());
    Plan p;
    p.full_shape = {g.N, g.OC};
    std::vector<int64_t> pb(s), pe(s), dil(s);
    for (size_t i = 0; i < s; ++i) {
      pb[i] = std::max<int64_t>(0, g.pad_begin[i]);
      pe[i] = std::max<int64_t>(0, g.pad_end[i]);
      dil[i] = g.dilation[i] - 1;
      int64_t range = (g.kernel[i] - 1) * g.dilation[i] + 1;
      p.full_shape.push_back(g.stride[i] * (g.in[i] - 1) + range - pb[i] - pe[i]);
    }
    try {
      dnnl::memory::desc w_plain = deconv_weights_desc(w_shape, g.G);
      dnnl::memory::desc src_any(to_dims(xs), dt::f32, tag::any), dst_any(to_dims(p.full_shape), dt::f32, tag::any);
      dnnl::memory::desc w_any(w_plain.dims(), dt::f32, tag::any);
      dnnl::memory::desc bias_md({g.OC}, dt::f32, tag::a);
      auto prop = dnnl::prop_kind::forward_inference;
      auto alg = dnnl::algorithm::deconvolution_direct;
      auto desc = has_bias ? dnnl::deconvolution_forward::desc(prop, alg, src_any, w_any, bias_md, dst_any, to_dims(g.stride),
                                                               to_dims(dil), to_dims(pb), to_dims(pe))
                           : dnnl::deconvolution_forward::desc(prop, alg, src_any, w_any, dst_any, to_dims(g.stride),
                                                               to_dims(dil), to_dims(pb), to_dims(pe));
      dnnl::deconvolution_forward::primitive_desc pd(desc, dnnl_engine());
      p.prim = dnnl::deconvolution_forward(pd);
      p.src_md = pd.src_desc();
      p.dst_md = pd.dst_desc();
      p.w_md = pd.weights_desc();
      if (use_const) {
        dnnl::memory plain(w_plain, dnnl_engine(), const_cast<void*>(const_w_->raw()));
        p.packed_w = packed_.get(plain, p.w_md);
      }
    } catch (const dnnl::error& e) {
      fail_dnnl("deconvolution primitive", e);
    }
    return plans_.emplace(key, std::move(p)).first->second;
  }

  void run_f32(const ConvGeometry& g, const float* x, const Tensor& w, const float* bias, float* y, bool may_use_const) {
    if (conv_transpose_is_tiling(g)) {
      conv_transpose_tiles(g, x, static_cast<const float*>(w.raw()), bias, y);
      return;
    }
    bool use_const = may_use_const && const_w_ && const_w_->raw() == w.raw();
    Shape xs = {g.N, g.C};
    xs.insert(xs.end(), g.in.begin(), g.in.end());
    std::lock_guard<std::mutex> lock(mu_);
    Plan& p = plan_for(g, w.shape(), bias != nullptr, use_const);
    auto& eng = dnnl_engine();
    auto& strm = dnnl_stream();
    bool crop = p.full_shape != g.out_shape;
    std::vector<float> full;
    if (crop) full.resize(static_cast<size_t>(shape_numel(p.full_shape)));
    try {
      dnnl::memory x_mem(plain_desc(xs), eng, const_cast<float*>(x));
      dnnl::memory src = reorder_if_needed(x_mem, p.src_md);
      dnnl::memory wmem = p.packed_w;
      if (!use_const) {
        dnnl::memory plain(deconv_weights_desc(w.shape(), g.G), eng, const_cast<void*>(w.raw()));
        wmem = reorder_if_needed(plain, p.w_md);
      }
      dnnl::memory y_mem(plain_desc(p.full_shape), eng, crop ? full.data() : y);
      bool direct = p.dst_md == y_mem.get_desc();
      dnnl::memory dst = direct ? y_mem : dnnl::memory(p.dst_md, eng);
      std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wmem}, {DNNL_ARG_DST, dst}};
      if (bias) args[DNNL_ARG_BIAS] = dnnl::memory({{g.OC}, dt::f32, tag::a}, eng, const_cast<float*>(bias));
      p.prim.execute(strm, args);
      if (!direct) dnnl::reorder(dst, y_mem).execute(strm, dst, y_mem);
      strm.wait();
    } catch (const dnnl::error& e) {
      fail_dnnl("deconvolution", e);
    }
    if (crop) crop_into(g, p.full_shape, full.data(), bias, y);
  }

  // y[n, c, o...] = full[n, c, o + shift...] where inside, else bias[c]; shift = min(pad_begin, 0).
  static void crop_into(const ConvGeometry& g, const Shape& full_shape, const float* full, const float* bias, float* y) {
    size_t s = g.out.size();
    int64_t out_plane = shape_numel(g.out), full_plane = 1;
    for (size_t i = 0; i < s; ++i) full_plane *= full_shape[2 + i];
    for (int64_t nc = 0; nc < g.N * g.OC; ++nc) {
      float bv = bias ? bias[nc % g.OC] : 0.f;
      const float* src = full + nc * full_plane;
      float* dst = y + nc * out_plane;
      for (int64_t o = 0; o < out_plane; ++o) {
        int64_t rem = o, off = 0, mul = 1;
        bool inside = true;
        for (size_t i = s; i-- > 0;) {
          int64_t idx = rem % g.out[i] + std::min<int64_t>(g.pad_begin[i], 0);
          rem /= g.out[i];
          if (idx < 0 || idx >= full_shape[2 + i]) inside = false;
          off += idx * mul;
          mul *= full_shape[2 + i];
        }
        dst[o] = inside ? src[off] : bv;
      }
    }
  }

  ConvAttrs attrs_;
  const Tensor* const_w_ = nullptr;
  std::map<std::vector<int64_t>, Plan> plans_;
  PackedWeightCache packed_;  // constant weights, one copy per layout the plans ask for
  std::mutex mu_;
};

}  // namespace

void register_conv_transpose(Registry& r) {
  r.add({"ConvTranspose", "", 1, 1000, 0, {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64},
         [](const KernelSpec& s) { return std::make_unique<ConvTransposeKernel>(s); }},
        kHeavy);
}

}  // namespace mminfer::kernels
