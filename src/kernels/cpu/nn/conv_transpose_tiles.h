// ConvTranspose whose stride equals its kernel, without padding, dilation, output padding or
// groups (FPN upsampling heads): output windows do not overlap, so every input pixel's window
// is one column of W^T[OC*k, C] · X[C, pixels]. A GEMM and a scatter in NCHW, with no blocked
// layout (oneDNN pads 1 output channel to 16 and reorders both ways).
#pragma once
#include "kernels/cpu/nn/conv_common.h"

namespace mminfer::kernels {

// 1-D and 2-D cases the tiled path handles.
bool conv_transpose_is_tiling(const ConvGeometry& g);
// x [N, C, in...], w [C, OC, k...], bias [OC] or null, y [N, OC, in * k...]; float32.
void conv_transpose_tiles(const ConvGeometry& g, const float* x, const float* w, const float* bias, float* y);

}  // namespace mminfer::kernels
