// The tiled MatMulNBits layout (nbits_tiled.h): written once from the ONNX one as a model loads,
// then multiplied by quantizing A once per call and splitting the tiles over the threads.
#include "kernels/cpu/quantization/nbits_tiled.h"

#include <algorithm>
#include <cstring>

#include "core/cpu_features.h"
#include "core/parallel.h"
#include "kernels/cpu/quantization/nbits_int8_dot.h"

namespace mminfer::kernels {

bool nbits_tiled_cpu() {
  const CpuFeatures& f = cpu_features();
  return f.avx512_vnni && f.avx512bw;
}

bool nbits_tiling_supported(const NBitsWeights& w) {
  return nbits_tiled_cpu() && (w.bits == 4 || w.bits == 8) && !w.g_idx && !w.zp_float && w.block_size >= 16 &&
         (w.block_size & (w.block_size - 1)) == 0;
}

void tile_nbits_weights(const NBitsWeights& w, uint8_t* codes, float* scales, uint8_t* zero_points) {
  constexpr int64_t T = NBitsTiled::kTileColumns;
  NBitsTiled t;
  t.K = w.K, t.N = w.N, t.bits = w.bits, t.block_size = w.block_size;
  const int64_t kb = w.k_blocks(), kp = kb * w.block_size, per_vector = w.bits == 8 ? 4 : 8;
  std::memset(codes, 0, static_cast<size_t>(t.code_bytes()));  // the columns past N
  std::memset(scales, 0, static_cast<size_t>(t.block_values()) * sizeof(float));
  std::memset(zero_points, 0, static_cast<size_t>(t.block_values()));
  parallel_for(t.tiles(), 1, [&](int64_t tile0, int64_t tile1) {
    for (int64_t tile = tile0; tile < tile1; ++tile) {
      uint8_t* tc = codes + tile * t.tile_code_bytes();
      for (int64_t c = 0; c < T && tile * T + c < w.N; ++c) {
        const int64_t n = tile * T + c, g = c / 16, l = c % 16;
        for (int64_t b = 0; b < kb; ++b) {
          const int64_t at = (tile * kb + b) * T + c;
          scales[at] = w.scales[n * kb + b];
          zero_points[at] = static_cast<uint8_t>(w.zero_point(n, b));
        }
        // Every code of the column's blocks, the last block's padding included: A's codes there
        // are zeros, so whatever the file holds adds nothing. A column's codes are contiguous in
        // K's order, low nibble first at 4 bits.
        const uint8_t* src = w.packed + n * kb * w.blob_bytes();
        for (int64_t step = 0; step < kp / per_vector; ++step) {
          uint8_t* dst = tc + (step * 4 + g) * 64 + l * 4;
          const uint8_t* from = src + step * 4;
          if (w.bits == 8) {
            std::memcpy(dst, from, 4);
          } else {  // from holds k = 8 step + 0..7 in pairs; lane byte j wants k = j (low) and j + 4 (high)
            dst[0] = static_cast<uint8_t>((from[0] & 0x0f) | (from[2] << 4));
            dst[1] = static_cast<uint8_t>((from[0] >> 4) | (from[2] & 0xf0));
            dst[2] = static_cast<uint8_t>((from[1] & 0x0f) | (from[3] << 4));
            dst[3] = static_cast<uint8_t>((from[1] >> 4) | (from[3] & 0xf0));
          }
        }
      }
    }
  });
}

void matmul_nbits_tiled(const NBitsTiled& t, const float* a, int64_t M, const float* bias, float* y) {
  // A's codes in K's order: the form quantize_int8_rows gives 8-bit weights.
  NBitsWeights form;
  form.K = t.K, form.N = t.N, form.bits = 8, form.block_size = t.block_size;
  thread_local Int8Rows rows;  // kept per thread so that decode steps allocate nothing once warm
  quantize_int8_rows(form, a, M, 128, rows, /*lane_scales=*/false);
  const Int8Rows& q = rows;  // named by reference: in the workers `rows` would be their own, empty
  // Enough work per thread that starting one pays: 32 KiB of codes, less as M grows. The work
  // is counted in half tiles.
  const int64_t grain = std::max<int64_t>(1, 2 * 32768 / t.tile_code_bytes() / std::max<int64_t>(1, M));
  parallel_for(2 * t.tiles(), grain, [&](int64_t half0, int64_t half1) { nbits_tiled_avx512vnni(t, q, half0, half1, y); });
  add_bias_rows(y, bias, M, t.N);
}

}  // namespace mminfer::kernels
