// panel_gemm's view of a oneDNN packing, and the check that it reproduces oneDNN's matmul on
// this machine (the kernel itself is in panel_gemm_avx512.cpp).
#include "kernels/cpu/gemm/panel_gemm.h"

#include <cstring>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "kernels/cpu/gemm/dense_gemm.h"

namespace mminfer::kernels {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

WeightPanels panels_of(const dnnl::memory& packed) {
  const dnnl_memory_desc_t& md = packed.get_desc().data;
  if (md.ndims != 2 || md.data_type != dnnl_f32 || md.format_kind != dnnl_blocked || md.offset0 != 0) return {};
  // Panels of 64 columns with K blocks of r rows inside each: [N/64][K/r][r][64], which is
  // [N/64][K][64] once the blocks are laid end to end.
  const dnnl_blocking_desc_t& b = md.format_desc.blocking;
  if (b.inner_nblks != 2 || b.inner_idxs[0] != 0 || b.inner_idxs[1] != 1 || b.inner_blks[1] != kPanelWidth) return {};
  const int64_t r = b.inner_blks[0], padded_k = md.padded_dims[0];
  if (b.strides[0] != r * kPanelWidth || b.strides[1] != padded_k * kPanelWidth) return {};
  return {static_cast<const float*>(packed.get_data_handle()), padded_k * kPanelWidth};
}

namespace {

// One product through both kernels, bit for bit.
bool same_bits(int64_t M, int64_t K, int64_t N, bool with_bias, bool residual, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  auto random = [&](int64_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    return v;
  };
  std::vector<float> w = random(K * N), bias = random(N), a = random(M * K), z = random(M * N);
  dnnl::memory plain({{K, N}, dt::f32, tag::ab}, dnnl_engine(), w.data());
  PackedWeights packed = pack_weights(plain, const_weight_desc(K, N));
  WeightPanels panels = panels_of(packed.mem);
  if (!panels.base) return false;
  const float* b = with_bias ? bias.data() : nullptr;
  std::vector<float> theirs = z, ours = z;
  onednn_matmul_f32(w.data(), b, a.data(), M, K, N, theirs.data(), residual, {});
  panel_gemm(panels, K, N, a.data(), M, ours.data(), residual, b);
  return std::memcmp(theirs.data(), ours.data(), theirs.size() * sizeof(float)) == 0;
}

}  // namespace

bool onednn_packs_panels(int64_t K, int64_t N) {
  return panels_of(dnnl::memory(const_weight_desc(K, N), dnnl_engine())).base != nullptr;
}

bool panel_gemm_in_use() {
  // One K per summing regime (one block, blocks of 512, blocks of 1,024, each with a ragged
  // end), few columns so that oneDNN has the least to split among threads. Once per process.
  static const bool in_use = [] {
    try {
      return cpu_features().avx512f && same_bits(3, 200, 100, true, true, 1) &&
             same_bits(7, 768, 64, true, false, 2) && same_bits(2, 1500, 130, false, true, 3) &&
             same_bits(6, 2100, 64, true, true, 4);
    } catch (const std::exception&) {
      return false;
    }
  }();
  return in_use;
}

}  // namespace mminfer::kernels
