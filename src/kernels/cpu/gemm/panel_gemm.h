// An FP32 GEMM for few rows over the weights oneDNN packed for its own matmul (no second copy),
// on CPUs with AVX-512, where oneDNN packs W in panels of 64 columns.
//
// Why: with few rows a product is bound by streaming W from DRAM. oneDNN's matmul reads each
// weight block from DRAM while it multiplies the first rows, then reuses it from cache for the
// others, so the stream and the multiply-adds add up instead of overlapping. Here every row
// tile of a K chunk prefetches its share of the next chunk, so the next weights arrive while
// all rows multiply.
//
// Each output is summed in exactly oneDNN's order (K blocks of 512, or of 1,024 when K is
// larger than 1,024, each summed from zero and then added in turn; then the bias, then the
// residual), so its bits do not depend on which of the two kernels ran, nor on the batch.
#pragma once
#include <cstdint>

#include <oneapi/dnnl/dnnl.hpp>

namespace mminfer::kernels {

inline constexpr int64_t kPanelWidth = 64;
// The most rows panel_gemm takes: past that the multiply-adds dominate and oneDNN is as fast.
inline constexpr int64_t kPanelGemmMaxRows = 64;

// Where W[k, n] lives: base + (n / 64) * panel_stride + k * 64 + n % 64 (floats); columns from N
// up to the next multiple of 64 are padding.
struct WeightPanels {
  const float* base = nullptr;
  int64_t panel_stride = 0;
};

// How panel_gemm reads a oneDNN packing of K x N weights in 64-column panels; empty for any
// other layout.
WeightPanels panels_of(const dnnl::memory& packed);

// Whether oneDNN packs K x N FP32 weights (for its matmul) in the panels panel_gemm reads.
bool onednn_packs_panels(int64_t K, int64_t N);

// Whether ConstWeightGemm runs panel_gemm here: on AVX-512, where oneDNN packs in panels and
// panel_gemm gives its matmul's bits (checked once per process on a few small products).
bool panel_gemm_in_use();

// y[M,N] = (a[M,K]·W + bias) + y when `residual_in_y`, else a·W + bias; bias may be null;
// 1 <= M <= kPanelGemmMaxRows. Needs AVX-512F.
void panel_gemm(const WeightPanels& w, int64_t K, int64_t N, const float* a, int64_t M, float* y,
                bool residual_in_y, const float* bias);

}  // namespace mminfer::kernels
