#include "kernels/cpu/quantization/conv_int8.h"


#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "core/cpu_features.h"
#include "core/parallel.h"
#include "kernels/cpu/common/kernel.h"
#include "kernels/cpu/gemm/activation_simd.h"
#include "kernels/cpu/quantization/int8_epilogue.h"

namespace mminfer::kernels {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

namespace {

// Ranges are kept at least 255 · kMinScale wide, so bias / (act_scale · w_scale) stays finite.
constexpr float kMinScale = 1e-15f;

QuantGrid grid_of(ValueRange r) {
  r.lo = std::fmin(r.lo, 0.f), r.hi = std::fmax(r.hi, 0.f);
  if (r.hi - r.lo < 255 * kMinScale) r.hi = r.lo + 255 * kMinScale;
  return quant_grid(r.lo, r.hi, r.bad);
}


dnnl::memory::dims dims_of(std::initializer_list<int64_t> v) { return dnnl::memory::dims(v); }

template <typename T>
void grow(std::vector<T>& v, int64_t n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
}

}  // namespace

int Int8Conv::weight_limit() { return cpu_features().vnni() ? 127 : 63; }

Int8Conv::Int8Conv(const Tensor& w, int64_t groups, const Activation& act, bool channels_last, const StaticRange* range)
    : G_(groups), w_shape_(w.shape()), act_(act), channels_last_(channels_last) {
  if (w.dtype() != DType::kFloat32 || w_shape_.size() != 4) fail("INT8 conv needs float32 weights [OC, C/G, kh, kw]");
  OC_ = w_shape_[0];
  if (range) {
    if (!std::isfinite(range->lo) || !std::isfinite(range->hi) || range->lo > range->hi)
      fail("INT8 conv: static range must be two finite floats with lo <= hi");
    fixed_ = grid_of({range->lo, range->hi, false});
  }
  const int64_t K = w.numel() / std::max<int64_t>(OC_, 1);
  const float* wf = w.data<float>();
  const float limit = static_cast<float>(weight_limit());
  wq_.resize(static_cast<size_t>(w.numel()));
  w_scale_.resize(static_cast<size_t>(OC_));
  w_sum_.assign(static_cast<size_t>(OC_), 0);
  for (int64_t oc = 0; oc < OC_; ++oc) {
    const float* row = wf + oc * K;
    float amax = 0.f;
    bool finite = true;
    for (int64_t k = 0; k < K; ++k) finite = finite && std::isfinite(row[k]), amax = std::fmax(amax, std::fabs(row[k]));
    // A NaN or inf weight has no int8 form: its channel comes out NaN.
    float s = !finite ? std::numeric_limits<float>::quiet_NaN() : amax == 0.f ? 1.f : std::fmax(amax / limit, kMinScale);
    w_scale_[oc] = s;
    for (int64_t k = 0; k < K; ++k) {
      float q = finite ? std::nearbyint(row[k] / s) : 0.f;
      wq_[oc * K + k] = static_cast<int8_t>(std::fmin(std::fmax(q, -limit), limit));
      w_sum_[oc] += wq_[oc * K + k];
    }
  }
}

bool Int8Conv::supports(const ConvGeometry& g) {
  return g.spatial() == 2 && (g.G == 1 || (g.G == g.C && g.G == g.OC));
}

// Measured with 2 threads (AVX-512 VNNI, oneDNN 2.6; int8_conv_test's DISABLED_TimesPpOcrShapes),
// FP32 time / INT8 time with the quantize pass, static range | dynamic range:
//   3x3 96->24 on 160x160 NCHW   2.02 | 1.66     1x1 240->480 on 6x80 NHWC   2.83 | 1.90
//   1x1 16->32 on 320x320 NHWC   1.30 | 0.33     depthwise 3x3 480 on 6x80   0.63 | 0.31
//   3x3/2 3->16 on 640x640 NCHW  1.00 | 0.41     3x3 16->32 on 160x160 NHWC  3.09 | 1.63
//   1x1 64->64 on 80x80 NHWC     1.93 | 0.83     1x1 32->64 on 80x80 NHWC    1.45 | 0.51
//   3x3 8->16 on 160x160 NCHW    1.33 | 0.72
// Depthwise convs and few input channels are memory-bound: quantizing costs what the int8
// product saves. A dynamic range adds a min/max pass and an int32 round trip through memory,
// which only enough taps per output (K = C·kh·kw) repay.
bool Int8Conv::pays(const ConvGeometry& g, bool dynamic_range) {
  if (!supports(g) || g.G != 1) return false;
  const int64_t taps = g.C * g.kernel[0] * g.kernel[1];
  return dynamic_range ? taps >= 128 : g.C >= 8 && taps >= 16;
}

QuantGrid Int8Conv::quantization_of(const float* x, int64_t n) const { return fixed_ ? *fixed_ : grid_of(value_range(x, n)); }

Int8Conv::Plan& Int8Conv::plan_for(const ConvGeometry& g, bool padded, bool has_bias, bool has_sum) {
  std::vector<int64_t> key = {g.N, g.C, g.in[0], g.in[1], padded, has_bias, has_sum};
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  if (plans_.size() >= 32) plans_.erase(plans_.begin());  // bound memory under shape churn
  const int64_t kh = w_shape_[2], kw = w_shape_[3];
  auto w_dims = G_ == 1 ? dims_of({OC_, g.C, kh, kw}) : dims_of({G_, OC_ / G_, g.C / G_, kh, kw});
  try {
    // oneDNN 2.6 has fast int8 convolutions only for channels-last data (plain NCHW gets its
    // reference loops): NCHW tensors are reordered around the call.
    const int64_t h = padded ? g.in[0] + g.pad_begin[0] + g.pad_end[0] : g.in[0];
    const int64_t w = padded ? g.in[1] + g.pad_begin[1] + g.pad_end[1] : g.in[1];
    std::vector<int64_t> pad_begin = padded ? std::vector<int64_t>{0, 0} : g.pad_begin;
    std::vector<int64_t> pad_end = padded ? std::vector<int64_t>{0, 0} : g.pad_end;
    dnnl::memory::desc src_md(dims_of({g.N, g.C, h, w}), dt::u8, tag::nhwc);
    dnnl::memory::desc dst_md(dims_of({g.N, g.OC, g.out[0], g.out[1]}), fixed_ ? dt::f32 : dt::s32, tag::nhwc);
    dnnl::memory::desc w_md(w_dims, dt::s8, tag::any), bias_md({OC_}, dt::f32, tag::a);
    dnnl::primitive_attr attr;
    if (fixed_) {  // everything fused; a dynamic scale is not (2.6 refuses runtime output scales here)
      std::vector<float> scales(static_cast<size_t>(OC_));
      for (int64_t oc = 0; oc < OC_; ++oc) scales[oc] = fixed_->scale * w_scale_[oc];
      attr.set_output_scales(1 << 1, scales);
      dnnl::post_ops ops;
      if (has_sum) ops.append_sum(1.f);
      append_activation(ops, act_);
      attr.set_post_ops(ops);
    }
    auto dims = [](const std::vector<int64_t>& v) { return dnnl::memory::dims(v.begin(), v.end()); };
    std::vector<int64_t> dil = {g.dilation[0] - 1, g.dilation[1] - 1};  // oneDNN counts from 0
    auto prop = dnnl::prop_kind::forward_inference;
    auto alg = dnnl::algorithm::convolution_direct;
    auto desc = has_bias && fixed_ ? dnnl::convolution_forward::desc(prop, alg, src_md, w_md, bias_md, dst_md, dims(g.stride),
                                                                     dims(dil), dims(pad_begin), dims(pad_end))
                                   : dnnl::convolution_forward::desc(prop, alg, src_md, w_md, dst_md, dims(g.stride),
                                                                     dims(dil), dims(pad_begin), dims(pad_end));
    dnnl::convolution_forward::primitive_desc pd(desc, attr, dnnl_engine());
    Plan p;
    p.prim = dnnl::convolution_forward(pd);
    // Pack once per weights layout; plans of other shapes usually share it.
    for (auto& [k, other] : plans_)
      if (other.weights.mem.get_desc() == pd.weights_desc()) p.weights = other.weights;
    if (!p.weights.owner) {
      dnnl::memory plain(dnnl::memory::desc(w_dims, dt::s8, G_ == 1 ? tag::abcd : tag::abcde), dnnl_engine(), wq_.data());
      p.weights = pack_weights(plain, pd.weights_desc());
    }
    return plans_.emplace(key, std::move(p)).first->second;
  } catch (const dnnl::error& e) {
    fail_dnnl("int8 convolution primitive", e);
  }
}

void Int8Conv::run(const ConvGeometry& g, const float* x, const float* bias, const float* z, float* y) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t n_in = g.N * g.C * g.in[0] * g.in[1], rows = g.N * g.out[0] * g.out[1], n_out = rows * OC_;
  const QuantGrid p = quantization_of(x, n_in);
  grow(qx_, n_in);
  quantize_values_u8(x, n_in, p, qx_.data());
  const bool padded = p.zero_point != 0 && (g.pad_begin[0] || g.pad_begin[1] || g.pad_end[0] || g.pad_end[1]);
  Plan& plan = plan_for(g, padded, bias != nullptr || p.zero_point != 0, z != nullptr);
  auto& eng = dnnl_engine();
  auto& strm = dnnl_stream();
  auto nhwc = [&](bool output, dt type, void* data) {
    auto d = output ? dims_of({g.N, g.OC, g.out[0], g.out[1]}) : dims_of({g.N, g.C, g.in[0], g.in[1]});
    return dnnl::memory({d, type, tag::nhwc}, eng, data);
  };
  try {
    dnnl::memory src = nhwc(false, dt::u8, qx_.data());
    if (!channels_last_) {  // quantized NCHW bytes to NHWC
      grow(qx_nhwc_, n_in);
      dnnl::memory plain({src.get_desc().dims(), dt::u8, tag::nchw}, eng, qx_.data());
      src = nhwc(false, dt::u8, qx_nhwc_.data());
      dnnl::reorder(plain, src).execute(strm, plain, src);
    }
    if (padded) {  // the padding holds the zero point, so every window carries the same zp · Σ w
      const int64_t H = g.in[0], W = g.in[1], C = g.C;
      const int64_t Hp = H + g.pad_begin[0] + g.pad_end[0], Wp = W + g.pad_begin[1] + g.pad_end[1];
      grow(qx_padded_, g.N * Hp * Wp * C);
      const uint8_t* from = static_cast<const uint8_t*>(src.get_data_handle());
      uint8_t* to = qx_padded_.data();
      std::memset(to, p.zero_point, static_cast<size_t>(g.N * Hp * Wp * C));
      parallel_for(g.N * H, std::max<int64_t>(1, 16384 / std::max<int64_t>(W * C, 1)), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          int64_t n = r / H, h = r % H;
          std::memcpy(to + ((n * Hp + h + g.pad_begin[0]) * Wp + g.pad_begin[1]) * C, from + r * W * C,
                      static_cast<size_t>(W * C));
        }
      });
      src = dnnl::memory({dims_of({g.N, C, Hp, Wp}), dt::u8, tag::nhwc}, eng, to);
    }
    dnnl::memory y_stored({{g.N, g.OC, g.out[0], g.out[1]}, dt::f32, channels_last_ ? tag::nhwc : tag::nchw}, eng, y);
    // Z and Y as NHWC: as stored, or in scratch for NCHW.
    const float* z_nhwc = z;
    float* y_nhwc = y;
    if (!channels_last_) {
      grow(y_nhwc_, n_out);
      y_nhwc = y_nhwc_.data();
      if (z) {
        grow(z_nhwc_, n_out);
        dnnl::memory zs({y_stored.get_desc().dims(), dt::f32, tag::nchw}, eng, const_cast<float*>(z));
        dnnl::memory zt = nhwc(true, dt::f32, z_nhwc_.data());
        dnnl::reorder(zs, zt).execute(strm, zs, zt);
        z_nhwc = z_nhwc_.data();
      }
    }
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, plan.weights.mem}};
    bias_.assign(static_cast<size_t>(OC_), 0.f);
    if (fixed_) {
      if (z && z_nhwc != y_nhwc) std::memcpy(y_nhwc, z_nhwc, static_cast<size_t>(n_out) * sizeof(float));  // summed by the post-op
      // Added to the int32 product before scaling: the bias in its units, less the zero point's share.
      for (int64_t oc = 0; oc < OC_; ++oc)
        bias_[oc] = (bias ? bias[oc] / (fixed_->scale * w_scale_[oc]) : 0.f) - static_cast<float>(p.zero_point) * w_sum_[oc];
      if (bias || p.zero_point) args[DNNL_ARG_BIAS] = dnnl::memory({{OC_}, dt::f32, tag::a}, eng, bias_.data());
      args[DNNL_ARG_DST] = nhwc(true, dt::f32, y_nhwc);
      plan.prim.execute(strm, args);
    } else {
      // The int32 product goes into Y's bytes unless they hold Z.
      int32_t* acc = reinterpret_cast<int32_t*>(y_nhwc);
      if (z_nhwc == y_nhwc) grow(acc_, n_out), acc = acc_.data();
      args[DNNL_ARG_DST] = nhwc(true, dt::s32, acc);
      plan.prim.execute(strm, args);
      strm.wait();
      if (bias) bias_.assign(bias, bias + OC_);
      const Int8Columns cols{w_sum_.data(), w_scale_.data(), bias_.data(), act_};
      auto finish = cpu_features().avx512f ? finish_int8_row_avx512 : finish_int8_row_avx2;
      parallel_for(rows, std::max<int64_t>(1, 8192 / OC_), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r)
          finish(cols, acc + r * OC_, OC_, p.zero_point, p.scale, z_nhwc ? z_nhwc + r * OC_ : nullptr, y_nhwc + r * OC_);
      });
    }
    if (!channels_last_) {
      dnnl::memory yt = nhwc(true, dt::f32, y_nhwc);
      dnnl::reorder(yt, y_stored).execute(strm, yt, y_stored);
    }
    strm.wait();
  } catch (const dnnl::error& e) {
    fail_dnnl("int8 convolution", e);
  }
}

void Int8Conv::run_reference(const ConvGeometry& g, const float* x, const float* bias, const float* z, float* y) const {
  const int64_t C = g.C, H = g.in[0], W = g.in[1], OH = g.out[0], OW = g.out[1];
  const int64_t Cg = C / G_, OCg = OC_ / G_, kh = w_shape_[2], kw = w_shape_[3];
  const int64_t n_in = g.N * C * H * W;
  QuantGrid p = fixed_ ? *fixed_ : grid_of(value_range_reference(x, n_in));
  std::vector<int32_t> q(static_cast<size_t>(n_in));  // q - zero point: the padding is 0 in these units
  for (int64_t i = 0; i < n_in; ++i) q[i] = quantize_value_u8(x[i], p) - p.zero_point;
  auto x_at = [&](int64_t n, int64_t c, int64_t h, int64_t w) {
    return channels_last_ ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w;
  };
  auto y_at = [&](int64_t n, int64_t c, int64_t h, int64_t w) {
    return channels_last_ ? ((n * OH + h) * OW + w) * OC_ + c : ((n * OC_ + c) * OH + h) * OW + w;
  };
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t oc = 0; oc < OC_; ++oc)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          int32_t acc = 0;
          for (int64_t ic = 0; ic < Cg; ++ic)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                int64_t h = oh * g.stride[0] - g.pad_begin[0] + i * g.dilation[0];
                int64_t w = ow * g.stride[1] - g.pad_begin[1] + j * g.dilation[1];
                if (h < 0 || h >= H || w < 0 || w >= W) continue;
                acc += q[x_at(n, oc / OCg * Cg + ic, h, w)] * wq_[((oc * Cg + ic) * kh + i) * kw + j];
              }
          float v = std::fma(static_cast<float>(acc), p.scale * w_scale_[oc], bias ? bias[oc] : 0.f);
          int64_t at = y_at(n, oc, oh, ow);
          if (z) v += z[at];
          y[at] = act_.apply(v);
        }
}

}  // namespace mminfer::kernels
