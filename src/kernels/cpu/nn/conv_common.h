// Attribute parsing and output geometry shared by Conv, ConvTranspose, ConvInteger, QLinearConv
// and mminfer::FusedConv.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/attributes.h"
#include "kernels/cpu/common/kernel.h"
#include "mminfer/tensor.h"

namespace mminfer::kernels {

struct ConvAttrs {
  std::string auto_pad = "NOTSET";
  std::vector<int64_t> kernel_shape, strides, dilations, pads, output_padding, output_shape;
  int64_t group = 1;
};
ConvAttrs read_conv_attrs(const Attributes& a);

struct ConvGeometry {
  int64_t N = 0, C = 0, OC = 0, G = 1;  // batch, input channels, output channels, groups
  Shape in, kernel, out;                // spatial extents
  std::vector<int64_t> stride, dilation, pad_begin, pad_end;
  Shape out_shape;                      // full output shape [N, OC, out...]
  int64_t spatial() const { return static_cast<int64_t>(in.size()); }
};

// Conv: x [N, C, in...], w [OC, C/G, k...].
ConvGeometry conv_geometry(const ConvAttrs& a, const Shape& x, const Shape& w);
// ConvTranspose: x [N, C, in...], w [C, OC/G, k...]. pad_begin/pad_end may come out negative
// (output_shape larger than the natural size); pad_end already has output_padding subtracted.
ConvGeometry conv_transpose_geometry(const ConvAttrs& a, const Shape& x, const Shape& w);
// The optional bias (input 2) has X's dtype and one value per output channel.
void check_conv_bias(const Inputs& in, const Tensor& x, int64_t out_channels);

}  // namespace mminfer::kernels
