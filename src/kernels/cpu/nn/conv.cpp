// Conv and mminfer::FusedConv (Conv + bias + optional residual sum + activation) on oneDNN.
// Constant weights are reordered once into the primitive's preferred (blocked) layout; a
// primitive is kept per input shape. Activations and the residual sum ride along as post-ops.
// FusedConv with channels_last = 1 reads X and Z and writes Y as [N, spatial..., C] (see the
// conv_channels_last pass): chains of convs then skip the layout conversions oneDNN needs.
// `precision = "int8"` (with an optional calibrated `int8_range`) runs float32 inputs on
// Int8Conv where it supports the geometry and measured faster (Int8Conv::pays).
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/gemm/dense_gemm.h"
#include "kernels/cpu/gemm/dnnl_util.h"
#include "kernels/cpu/math/matmul_common.h"
#include "kernels/cpu/nn/conv_common.h"
#include "kernels/cpu/nn/conv_patch.h"
#include "kernels/cpu/quantization/conv_int8.h"

namespace mminfer::kernels {

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

dnnl::memory::dims to_dims(const std::vector<int64_t>& v) { return dnnl::memory::dims(v.begin(), v.end()); }

// Weights [OC, C/G, k...] as oneDNN sees them: grouped weights get a leading G dimension.
dnnl::memory::desc conv_weights_desc(const Shape& w, int64_t groups) {
  if (groups == 1) return plain_desc(w);
  Shape gw = {groups, w[0] / groups};
  gw.insert(gw.end(), w.begin() + 1, w.end());
  return plain_desc(gw);
}

class ConvKernel : public Kernel {
 public:
  bool runs_onednn() const override { return true; }
  ConvKernel(const KernelSpec& spec, bool fused) : fused_(fused) {
    attrs_ = read_conv_attrs(spec.a());
    if (fused) act_ = Activation::from_attrs(spec.a());
    channels_last_ = fused && spec.a().get_int("channels_last", 0) != 0;
    const Tensor* w = spec.constant_inputs.size() > 1 ? spec.constant_inputs[1] : nullptr;
    if (w && w->dtype() == DType::kFloat32) const_w_ = w;
    // bf16 and fp16 are valid policy words; convs have no such kernels and stay FP32 under them.
    if (precision_attr(spec) == "int8") {
      std::optional<StaticRange> range = int8_range_attr(spec);
      if (const_w_ && const_w_->shape().size() == 4)
        int8_ = std::make_unique<Int8Conv>(*const_w_, attrs_.group, act_, channels_last_, range ? &*range : nullptr);
    }
    // Patches of one pixel are pointwise convs, which oneDNN runs well (and channels-last
    // chains of them without reorders); the patch path is for real windows on NCHW input.
    if (const_w_ && !channels_last_ && is_patch_conv(spec) && const_w_->shape()[2] * const_w_->shape()[3] > 1) {
      const Tensor* b = spec.constant_inputs.size() > 2 ? spec.constant_inputs[2] : nullptr;
      patch_ = std::make_unique<PatchConv>(spec, *const_w_, b ? b->data<float>() : nullptr, act_);
    }
  }

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "X");
    const Tensor& w = need_input(in, 1, "W");
    if (x.dtype() != w.dtype()) fail(std::string("X and W dtypes differ: ") + dtype_name(x.dtype()) + " vs " + dtype_name(w.dtype()));
    ConvGeometry g = geometry(x.shape(), w.shape());
    check_conv_bias(in, x, g.OC);
    Shape y_shape = stored_shape(g.out_shape);
    if (fused_ && in.size() > 3 && in[3]) {
      if (in[3]->shape() != y_shape) fail("Z must have the output shape " + shape_str(y_shape) + ", got " + shape_str(in[3]->shape()));
      if (in[3]->dtype() != x.dtype()) fail("Z dtype differs from X");
    }
    out[0] = {x.dtype(), y_shape};
  }

  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    const Tensor& w = *in[1];
    const Tensor* b = in.size() > 2 ? in[2] : nullptr;
    const Tensor* z = fused_ && in.size() > 3 ? in[3] : nullptr;
    Tensor& y = *out[0];
    ConvGeometry g = geometry(x.shape(), w.shape());
    if (y.numel() == 0) return;
    if (int8_ && x.dtype() == DType::kFloat32 && w.raw() == const_w_->raw() && Int8Conv::pays(g, int8_->dynamic_range())) {
      int8_->run(g, x.data<float>(), b ? b->data<float>() : nullptr, z ? z->data<float>() : nullptr, y.data<float>());
      return;
    }
    if (patch_ && x.dtype() == DType::kFloat32 && w.raw() == const_w_->raw() && PatchConv::applies(g)) {
      patch_->run(g, x.data<float>(), z ? z->data<float>() : nullptr, y.data<float>());
      return;
    }
    if (x.dtype() == DType::kFloat32) {
      run_f32(g, x.data<float>(), w, b ? b->data<float>() : nullptr, z ? z->data<float>() : nullptr, y.data<float>());
      return;
    }
    // float16 / bfloat16 / float64 compute in float32.
    std::vector<float> xf = to_f32(x), wf = to_f32(w), bf = b ? to_f32(*b) : std::vector<float>();
    std::vector<float> zf = z ? to_f32(*z) : std::vector<float>(), yf(static_cast<size_t>(y.numel()));
    Tensor wt = Tensor::view(DType::kFloat32, w.shape(), wf.data());
    run_f32(g, xf.data(), wt, b ? bf.data() : nullptr, z ? zf.data() : nullptr, yf.data(), false);
    from_f32(yf.data(), y);
  }

 private:
  // Attributes alone say the windows tile the input (PatchConv), weights and bias are constant
  // float32, and the bias (if any) is constant.
  static bool is_patch_conv(const KernelSpec& spec) {
    const Shape& w = spec.constant_inputs[1]->shape();
    ConvAttrs a = read_conv_attrs(spec.a());
    if (w.size() != 4 || a.group != 1 || (a.auto_pad != "NOTSET" && a.auto_pad != "VALID")) return false;
    if (a.strides != std::vector<int64_t>{w[2], w[3]}) return false;
    if (!a.kernel_shape.empty() && a.kernel_shape != std::vector<int64_t>{w[2], w[3]}) return false;
    for (int64_t p : a.pads)
      if (p != 0) return false;
    for (int64_t d : a.dilations)
      if (d != 1) return false;
    if (!spec.has_input(2)) return true;
    const Tensor* b = spec.constant_inputs.size() > 2 ? spec.constant_inputs[2] : nullptr;
    return b && b->dtype() == DType::kFloat32 && b->numel() == w[0];
  }

  // Geometry from X as stored: channels-last X is [N, spatial..., C].
  ConvGeometry geometry(const Shape& x, const Shape& w) const {
    if (!channels_last_ || x.size() < 3) return conv_geometry(attrs_, x, w);
    Shape nchw = {x[0], x.back()};
    nchw.insert(nchw.end(), x.begin() + 1, x.end() - 1);
    return conv_geometry(attrs_, nchw, w);
  }
  // [N, C, spatial...] as stored.
  Shape stored_shape(const Shape& nchw) const {
    if (!channels_last_) return nchw;
    Shape s = {nchw[0]};
    s.insert(s.end(), nchw.begin() + 2, nchw.end());
    s.push_back(nchw[1]);
    return s;
  }
  // oneDNN's view of an activation tensor with logical dims [N, C, spatial...].
  dnnl::memory::desc stored_desc(const Shape& nchw) const {
    return channels_last_ ? channels_last_desc(nchw) : plain_desc(nchw);
  }

  struct Plan {
    dnnl::convolution_forward prim;
    dnnl::memory::desc src_md, dst_md, w_md;  // the primitive's layouts
    dnnl::memory packed_w;                    // constant weights, reordered
  };

  Plan& plan_for(const ConvGeometry& g, const Shape& w_shape, bool has_bias, bool has_sum, bool use_const) {
    std::vector<int64_t> key = {g.N, g.C, has_bias, has_sum, use_const};
    key.insert(key.end(), g.in.begin(), g.in.end());
    key.insert(key.end(), w_shape.begin(), w_shape.end());
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
    if (plans_.size() >= 32) plans_.erase(plans_.begin());
    Shape xs = {g.N, g.C}, ys = g.out_shape;
    xs.insert(xs.end(), g.in.begin(), g.in.end());
    Shape wd = w_shape;
    Shape wdims = g.G == 1 ? wd : Shape{g.G, wd[0] / g.G};
    if (g.G != 1) wdims.insert(wdims.end(), wd.begin() + 1, wd.end());
    std::vector<int64_t> dil(g.dilation.size());
    for (size_t i = 0; i < dil.size(); ++i) dil[i] = g.dilation[i] - 1;  // oneDNN counts from 0
    try {
      // Channels-last tensors are used as they are stored; otherwise oneDNN picks a layout.
      dnnl::memory::desc src_any = channels_last_ ? stored_desc(xs) : dnnl::memory::desc(to_dims(xs), dt::f32, tag::any);
      dnnl::memory::desc dst_any = channels_last_ ? stored_desc(ys) : dnnl::memory::desc(to_dims(ys), dt::f32, tag::any);
      dnnl::memory::desc w_any(to_dims(wdims), dt::f32, tag::any);
      dnnl::memory::desc bias_md({g.OC}, dt::f32, tag::a);
      dnnl::primitive_attr attr;
      dnnl::post_ops ops;
      if (has_sum) ops.append_sum(1.f);
      append_activation(ops, act_);
      attr.set_post_ops(ops);
      auto prop = dnnl::prop_kind::forward_inference;
      auto alg = dnnl::algorithm::convolution_direct;
      auto desc = has_bias ? dnnl::convolution_forward::desc(prop, alg, src_any, w_any, bias_md, dst_any, to_dims(g.stride),
                                                             to_dims(dil), to_dims(g.pad_begin), to_dims(g.pad_end))
                           : dnnl::convolution_forward::desc(prop, alg, src_any, w_any, dst_any, to_dims(g.stride),
                                                             to_dims(dil), to_dims(g.pad_begin), to_dims(g.pad_end));
      dnnl::convolution_forward::primitive_desc pd(desc, attr, dnnl_engine());
      Plan p;
      p.prim = dnnl::convolution_forward(pd);
      p.src_md = pd.src_desc();
      p.dst_md = pd.dst_desc();
      p.w_md = pd.weights_desc();
      if (use_const) {
        dnnl::memory plain(conv_weights_desc(const_w_->shape(), g.G), dnnl_engine(), const_cast<void*>(const_w_->raw()));
        p.packed_w = packed_.get(plain, p.w_md);
      }
      return plans_.emplace(key, std::move(p)).first->second;
    } catch (const dnnl::error& e) {
      fail_dnnl("convolution primitive", e);
    }
  }

  void run_f32(const ConvGeometry& g, const float* x, const Tensor& w, const float* bias, const float* z, float* y,
               bool may_use_const = true) {
    bool use_const = may_use_const && const_w_ && const_w_->raw() == w.raw();
    Shape xs = {g.N, g.C};
    xs.insert(xs.end(), g.in.begin(), g.in.end());
    std::lock_guard<std::mutex> lock(mu_);
    Plan& p = plan_for(g, w.shape(), bias != nullptr, z != nullptr, use_const);
    auto& eng = dnnl_engine();
    auto& strm = dnnl_stream();
    try {
      dnnl::memory x_mem(stored_desc(xs), eng, const_cast<float*>(x));
      dnnl::memory src = reorder_if_needed(x_mem, p.src_md);
      dnnl::memory wmem = p.packed_w;
      if (!use_const) {
        dnnl::memory plain(conv_weights_desc(w.shape(), g.G), eng, const_cast<void*>(w.raw()));
        wmem = reorder_if_needed(plain, p.w_md);
      }
      dnnl::memory y_mem(stored_desc(g.out_shape), eng, y);
      bool direct = p.dst_md == y_mem.get_desc();
      dnnl::memory dst = direct ? y_mem : dnnl::memory(p.dst_md, eng);
      if (z) {  // the sum post-op adds what dst already holds
        dnnl::memory z_mem(stored_desc(g.out_shape), eng, const_cast<float*>(z));
        dnnl::reorder(z_mem, dst).execute(strm, z_mem, dst);
      }
      std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wmem}, {DNNL_ARG_DST, dst}};
      dnnl::memory b_mem;
      if (bias) args[DNNL_ARG_BIAS] = dnnl::memory({{g.OC}, dt::f32, tag::a}, eng, const_cast<float*>(bias));
      p.prim.execute(strm, args);
      if (!direct) dnnl::reorder(dst, y_mem).execute(strm, dst, y_mem);
      strm.wait();
    } catch (const dnnl::error& e) {
      fail_dnnl("convolution", e);
    }
  }

  bool fused_;
  bool channels_last_ = false;
  ConvAttrs attrs_;
  Activation act_;
  const Tensor* const_w_ = nullptr;
  std::unique_ptr<PatchConv> patch_;  // set when the attributes make this a patch convolution
  std::unique_ptr<Int8Conv> int8_;    // set for precision = "int8"
  std::map<std::vector<int64_t>, Plan> plans_;
  PackedWeightCache packed_;
  std::mutex mu_;
};

const std::vector<DType> kConvTypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};

}  // namespace

void register_conv(Registry& r) {
  r.add({"Conv", "", 1, 1000, 0, kConvTypes, [](const KernelSpec& s) { return std::make_unique<ConvKernel>(s, false); }},
        kHeavy);
  r.add({"FusedConv", "mminfer", 1, 1000, 0, kConvTypes,
         [](const KernelSpec& s) { return std::make_unique<ConvKernel>(s, true); }},
        {.foldable = false, .heavy = true});
}

}  // namespace mminfer::kernels
