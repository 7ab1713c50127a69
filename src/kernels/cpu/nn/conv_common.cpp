#include "kernels/cpu/nn/conv_common.h"

#include "kernels/cpu/common/kernel.h"

namespace mminfer::kernels {

ConvAttrs read_conv_attrs(const Attributes& a) {
  ConvAttrs c;
  c.auto_pad = a.get_string("auto_pad", "NOTSET");
  c.kernel_shape = a.get_ints("kernel_shape");
  c.strides = a.get_ints("strides");
  c.dilations = a.get_ints("dilations");
  c.pads = a.get_ints("pads");
  c.output_padding = a.get_ints("output_padding");
  c.output_shape = a.get_ints("output_shape");
  c.group = a.get_int("group", 1);
  if (c.auto_pad != "NOTSET" && c.auto_pad != "SAME_UPPER" && c.auto_pad != "SAME_LOWER" && c.auto_pad != "VALID")
    fail("attribute 'auto_pad' has unknown value '" + c.auto_pad + "'");
  if (c.group < 1) fail("attribute 'group' must be >= 1, got " + std::to_string(c.group));
  return c;
}

namespace {

// Fills kernel/stride/dilation/pads common to both directions, validating their lengths.
void common(const ConvAttrs& a, const Shape& x, const Shape& w, ConvGeometry& g) {
  if (x.size() < 3 || x.size() > 5) fail("X must have rank 3 to 5 (N, C, 1 to 3 spatial dims), got " + shape_str(x));
  if (w.size() != x.size()) fail("W rank " + std::to_string(w.size()) + " differs from X rank " + std::to_string(x.size()));
  size_t s = x.size() - 2;
  g.N = x[0];
  g.C = x[1];
  g.G = a.group;
  g.in.assign(x.begin() + 2, x.end());
  g.kernel.assign(w.begin() + 2, w.end());
  if (!a.kernel_shape.empty() && a.kernel_shape != g.kernel)
    fail("attribute 'kernel_shape' " + shape_str(a.kernel_shape) + " differs from W's " + shape_str(g.kernel));
  auto per_dim = [&](const std::vector<int64_t>& v, int64_t fallback, const char* name) {
    if (v.empty()) return std::vector<int64_t>(s, fallback);
    if (v.size() != s) fail(std::string("attribute '") + name + "' needs " + std::to_string(s) + " values, got " + std::to_string(v.size()));
    return v;
  };
  g.stride = per_dim(a.strides, 1, "strides");
  g.dilation = per_dim(a.dilations, 1, "dilations");
  for (size_t i = 0; i < s; ++i) {
    if (g.stride[i] < 1) fail("attribute 'strides' must be >= 1");
    if (g.dilation[i] < 1) fail("attribute 'dilations' must be >= 1");
    if (g.kernel[i] < 1) fail("W has an empty kernel dimension: " + shape_str(w));
  }
  if (a.pads.empty()) {
    g.pad_begin.assign(s, 0);
    g.pad_end.assign(s, 0);
  } else {
    if (a.pads.size() != 2 * s) fail("attribute 'pads' needs " + std::to_string(2 * s) + " values, got " + std::to_string(a.pads.size()));
    g.pad_begin.assign(a.pads.begin(), a.pads.begin() + s);
    g.pad_end.assign(a.pads.begin() + s, a.pads.end());
    for (size_t i = 0; i < 2 * s; ++i)
      if (a.pads[i] < 0) fail("attribute 'pads' must not be negative");
  }
}

}  // namespace

ConvGeometry conv_geometry(const ConvAttrs& a, const Shape& x, const Shape& w) {
  ConvGeometry g;
  common(a, x, w, g);
  g.OC = w[0];
  if (g.C != w[1] * g.G)
    fail("X has " + std::to_string(g.C) + " channels but W " + shape_str(w) + " with group " + std::to_string(g.G) + " expects " +
         std::to_string(w[1] * g.G));
  if (g.OC % g.G != 0) fail("W's " + std::to_string(g.OC) + " output channels are not divisible by group " + std::to_string(g.G));
  size_t s = g.in.size();
  g.out.resize(s);
  for (size_t i = 0; i < s; ++i) {
    int64_t range = (g.kernel[i] - 1) * g.dilation[i] + 1;
    if (a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER") {
      int64_t out = (g.in[i] + g.stride[i] - 1) / g.stride[i];
      int64_t total = std::max<int64_t>(0, (out - 1) * g.stride[i] + range - g.in[i]);
      int64_t small = total / 2;
      g.pad_begin[i] = a.auto_pad == "SAME_UPPER" ? small : total - small;
      g.pad_end[i] = total - g.pad_begin[i];
    } else if (a.auto_pad == "VALID") {
      g.pad_begin[i] = g.pad_end[i] = 0;
    }
    int64_t span = g.in[i] + g.pad_begin[i] + g.pad_end[i] - range;
    if (span < 0)
      fail("kernel extent " + std::to_string(range) + " exceeds padded input extent " +
           std::to_string(g.in[i] + g.pad_begin[i] + g.pad_end[i]) + " in spatial dim " + std::to_string(i));
    g.out[i] = span / g.stride[i] + 1;
  }
  g.out_shape = {g.N, g.OC};
  g.out_shape.insert(g.out_shape.end(), g.out.begin(), g.out.end());
  return g;
}

ConvGeometry conv_transpose_geometry(const ConvAttrs& a, const Shape& x, const Shape& w) {
  ConvGeometry g;
  common(a, x, w, g);
  if (w[0] != g.C) fail("X has " + std::to_string(g.C) + " channels but W " + shape_str(w) + " expects " + std::to_string(w[0]));
  if (g.C % g.G != 0) fail("input channels " + std::to_string(g.C) + " are not divisible by group " + std::to_string(g.G));
  g.OC = w[1] * g.G;
  size_t s = g.in.size();
  std::vector<int64_t> out_pad = a.output_padding.empty() ? std::vector<int64_t>(s, 0) : a.output_padding;
  if (out_pad.size() != s) fail("attribute 'output_padding' needs " + std::to_string(s) + " values");
  const std::vector<int64_t>* shape_attr = &a.output_shape;
  std::vector<int64_t> trimmed;
  if (a.output_shape.size() == s + 2) {  // some exporters give the full N, C, ... shape
    trimmed.assign(a.output_shape.begin() + 2, a.output_shape.end());
    shape_attr = &trimmed;
  } else if (!a.output_shape.empty() && a.output_shape.size() != s) {
    fail("attribute 'output_shape' needs " + std::to_string(s) + " values");
  }
  g.out.resize(s);
  for (size_t i = 0; i < s; ++i) {
    if (out_pad[i] < 0) fail("attribute 'output_padding' must not be negative");
    int64_t range = (g.kernel[i] - 1) * g.dilation[i] + 1;
    int64_t natural = g.stride[i] * (g.in[i] - 1) + out_pad[i] + range;  // before padding
    bool same = a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER";
    if (!shape_attr->empty() || same) {
      int64_t out = !shape_attr->empty() ? (*shape_attr)[i] : g.in[i] * g.stride[i];
      int64_t total = natural - out;
      // Spec: SAME_UPPER puts the smaller half first. Floor division, as in the spec's Python, so
      // a negative total (output larger than natural) grows the end.
      int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      if (a.auto_pad == "SAME_UPPER") {
        g.pad_begin[i] = half;
        g.pad_end[i] = total - half;
      } else {
        g.pad_begin[i] = total - half;
        g.pad_end[i] = half;
      }
      g.out[i] = out;
    } else {
      if (a.auto_pad == "VALID") g.pad_begin[i] = g.pad_end[i] = 0;
      g.out[i] = natural - g.pad_begin[i] - g.pad_end[i];
    }
    if (g.out[i] < 0) fail("output extent would be negative in spatial dim " + std::to_string(i));
    g.pad_end[i] -= out_pad[i];  // what remains for the plain transposed conv to crop
  }
  g.out_shape = {g.N, g.OC};
  g.out_shape.insert(g.out_shape.end(), g.out.begin(), g.out.end());
  return g;
}

void check_conv_bias(const Inputs& in, const Tensor& x, int64_t out_channels) {
  if (in.size() > 2 && in[2]) {
    if (in[2]->dtype() != x.dtype()) fail("B dtype differs from X");
    if (in[2]->numel() != out_channels)
      fail("B must have " + std::to_string(out_channels) + " values, got " + shape_str(in[2]->shape()));
  }
}

}  // namespace mminfer::kernels
