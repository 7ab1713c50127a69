// matmul_nbits_int8 (matmul_nbits.h): quantizes A once per call, then splits the columns over
// the threads and runs the chosen ISA's integer kernel on each part; long prompts take the FP32
// GEMM on the rounded activations instead.
#include <algorithm>
#include <vector>

#include "core/cpu_features.h"
#include "core/parallel.h"
#include "kernels/cpu/quantization/nbits_int8_dot.h"

namespace mminfer::kernels {

namespace {

NBitsInt8Isa widest_allowed() {
  const CpuFeatures& f = cpu_features();
  if (f.avx512_vnni && f.avx512bw) return NBitsInt8Isa::kAvx512Vnni;
  if (f.avx_vnni) return NBitsInt8Isa::kAvxVnni;
  return NBitsInt8Isa::kAvx2;
}

}  // namespace

void matmul_nbits_int8(const NBitsWeights& w, const float* a, int64_t M, const float* bias, float* y, NBitsInt8Isa isa) {
  // Many rows (a long prompt's prefill): the same product as A rounded per block times the
  // dequantized weight, which the FP32 GEMM on dequantized panels computes faster once enough rows
  // share each panel (at 128 rows 0.6-0.8x the integer kernel's time on decoder shapes, at 512
  // about 0.5x; below 64 rows the integer kernel wins).
  constexpr int64_t kGemmRows = 128;
  if (isa == NBitsInt8Isa::kAuto && M >= kGemmRows && matmul_nbits_fast_supported(w)) {
    thread_local std::vector<float> rounded;
    rounded.resize(static_cast<size_t>(M * w.K));
    round_activations_to_int8_blocks(a, M, w.K, w.block_size, rounded.data());
    matmul_nbits_fast(w, rounded.data(), M, bias, y);
    return;
  }
  if (isa == NBitsInt8Isa::kAuto) isa = widest_allowed();
  thread_local Int8Rows rows;  // kept per thread so that decode steps allocate nothing once warm
  quantize_int8_rows(w, a, M, isa == NBitsInt8Isa::kAvx512Vnni ? 128 : 64, rows);
  const Int8Rows& q = rows;  // named by reference: in the workers `rows` would be their own, empty
  // Enough work per thread that starting one pays: 32 KiB of packed weight, less as M grows.
  const int64_t column_bytes = std::max<int64_t>(1, w.k_blocks() * w.blob_bytes());
  const int64_t grain = std::max<int64_t>(4, 32768 / column_bytes / std::max<int64_t>(1, M));
  parallel_for(w.N, grain, [&](int64_t n0, int64_t n1) {
    switch (isa) {
      case NBitsInt8Isa::kAvx512Vnni: nbits_int8_dot_avx512vnni(w, q, n0, n1, y); break;
      case NBitsInt8Isa::kAvxVnni: nbits_int8_dot_avxvnni(w, q, n0, n1, y); break;
      default: nbits_int8_dot_avx2(w, q, n0, n1, y); break;
    }
  });
  add_bias_rows(y, bias, M, w.N);
}

}  // namespace mminfer::kernels
