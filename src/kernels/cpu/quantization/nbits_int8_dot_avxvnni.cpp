// The AVX-VNNI int8 MatMulNBits kernel (nbits_int8_dot.h): vpdpbusd on 256-bit vectors, which
// sums four u8 · s8 products straight into int32 (no saturation). Built with -mavxvnni
// (CMakeLists.txt) and reached only when cpu_features() has AVX-VNNI.
#include "kernels/cpu/quantization/nbits_int8_ymm_ops.h"
#include "kernels/cpu/quantization/nbits_int8_dot_body.h"

namespace mminfer::kernels {

namespace {

struct AvxVnniOps : YmmOps {
  static VI dot8(VI w, VI a) { return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), w, a); }
  static VI dot4(VI lo, VI a_lo, VI hi, VI a_hi) {
    return _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), lo, a_lo), hi, a_hi);
  }
};

}  // namespace

void nbits_int8_dot_avxvnni(const NBitsWeights& w, const Int8Rows& q, int64_t n0, int64_t n1, float* y) {
  int8_dispatch<AvxVnniOps>(w, q, n0, n1, y);
}

}  // namespace mminfer::kernels
