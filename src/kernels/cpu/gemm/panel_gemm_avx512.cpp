// panel_gemm (panel_gemm.h): each thread walks its own 64-column panels in K chunks of 64 rows
// (16 KiB of weights, kept in L1 while every row tile uses them); a tile is 6 rows x 64 columns
// in 24 accumulators. Built with -mavx512f.
#include <immintrin.h>

#include <algorithm>

#include "core/parallel.h"
#include "kernels/cpu/gemm/panel_gemm.h"

namespace mminfer::kernels {

namespace {

constexpr int64_t kChunk = 64;  // divides oneDNN's K blocks, so no chunk straddles two
constexpr int kTileRows = 6;

// oneDNN's K block for FP32 matmul on this packing (measured against its matmul, and checked by
// the unit tests): each block's sum starts from zero and the blocks' sums are added in turn.
int64_t onednn_k_block(int64_t K) { return K <= 1024 ? 512 : 1024; }

// What a tile does once its chunk is multiplied in.
enum class TileEnd {
  kPartial,  // the block goes on: keep the running sums in `part`
  kBlock,    // a block ends, not the last: sum = its sum (first block) or sum + its sum
  kLast,     // the last block ends: y = (sum + its sum) + bias (+ y), masked to the panel's columns
};

struct TileArgs {
  const float* a;  // rows x kc, row stride lda
  int64_t lda;
  const float* w;  // kc x 64
  int64_t kc;
  bool resume;  // the chunk continues a block: start from `part`
  TileEnd end;
  bool first_block;  // `sum` holds nothing yet
  float* part;       // rows x 64
  float* sum;        // rows x 64
  float* y;          // kLast: rows x 64 at row stride ldy, columns masked
  int64_t ldy;
  __mmask16 mask[4];
  const float* bias;  // 64 floats, or null
  bool residual;      // add y's old values last
  const char* prefetch;  // this tile's share of the next chunk
  int64_t prefetch_lines;
};

template <int R>
void run_tile(const TileArgs& t) {
  __m512 acc[R][4];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) acc[r][v] = t.resume ? _mm512_load_ps(t.part + r * 64 + 16 * v) : _mm512_setzero_ps();
  const int64_t per_step = (t.prefetch_lines + t.kc - 1) / t.kc;
  const char* pf = t.prefetch;
  const char* const pf_end = t.prefetch + t.prefetch_lines * 64;
  for (int64_t k = 0; k < t.kc; ++k) {
    for (int64_t i = 0; i < per_step && pf < pf_end; ++i, pf += 64) _mm_prefetch(pf, _MM_HINT_T0);
    const float* wk = t.w + k * kPanelWidth;
    const __m512 w0 = _mm512_load_ps(wk), w1 = _mm512_load_ps(wk + 16), w2 = _mm512_load_ps(wk + 32),
                 w3 = _mm512_load_ps(wk + 48);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(t.a[r * t.lda + k]);
      acc[r][0] = _mm512_fmadd_ps(av, w0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(av, w1, acc[r][1]);
      acc[r][2] = _mm512_fmadd_ps(av, w2, acc[r][2]);
      acc[r][3] = _mm512_fmadd_ps(av, w3, acc[r][3]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      __m512 s = acc[r][v];
      if (t.end == TileEnd::kPartial) {
        _mm512_store_ps(t.part + r * 64 + 16 * v, s);
        continue;
      }
      if (!t.first_block) s = _mm512_add_ps(_mm512_load_ps(t.sum + r * 64 + 16 * v), s);
      if (t.end == TileEnd::kBlock) {
        _mm512_store_ps(t.sum + r * 64 + 16 * v, s);
        continue;
      }
      if (t.bias) s = _mm512_add_ps(s, _mm512_load_ps(t.bias + 16 * v));
      float* out = t.y + r * t.ldy + 16 * v;
      if (t.residual) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(t.mask[v], out));
      _mm512_mask_storeu_ps(out, t.mask[v], s);
    }
}

void run_tile(const TileArgs& t, int rows) {
  switch (rows) {
    case 6: return run_tile<6>(t);
    case 5: return run_tile<5>(t);
    case 4: return run_tile<4>(t);
    case 3: return run_tile<3>(t);
    case 2: return run_tile<2>(t);
    default: return run_tile<1>(t);
  }
}

__mmask16 column_mask(int64_t cols) { return cols >= 16 ? 0xFFFF : cols <= 0 ? 0 : (1u << cols) - 1; }

struct Product {
  const WeightPanels& w;
  int64_t K, N, M;
  const float* a;
  float* y;
  bool residual_in_y;
  const float* bias;
};

// Panel j of y, chunk by chunk, prefetching as it goes the chunk after (of this panel, or the
// first of panel `then`, the one this thread does next; -1 for none).
void run_panel(const Product& p, int64_t j, int64_t then) {
  alignas(64) float part[kPanelGemmMaxRows * kPanelWidth];
  alignas(64) float sum[kPanelGemmMaxRows * kPanelWidth];
  alignas(64) float bias_panel[kPanelWidth];
  const int64_t K = p.K, M = p.M;
  const int64_t block = onednn_k_block(K);
  const int64_t row_tiles = (M + kTileRows - 1) / kTileRows;
  const int64_t n0 = j * kPanelWidth, cols = std::min(kPanelWidth, p.N - n0);
  const float* panel = p.w.base + j * p.w.panel_stride;
  TileArgs t{};
  t.lda = K;
  t.ldy = p.N;
  for (int v = 0; v < 4; ++v) t.mask[v] = column_mask(cols - 16 * v);
  if (p.bias) {
    std::fill(bias_panel, bias_panel + kPanelWidth, 0.f);
    std::copy(p.bias + n0, p.bias + n0 + cols, bias_panel);
    t.bias = bias_panel;
  }
  t.residual = p.residual_in_y;
  for (int64_t k0 = 0; k0 < K; k0 += kChunk) {
    t.kc = std::min(kChunk, K - k0);
    t.w = panel + k0 * kPanelWidth;
    const int64_t k1 = k0 + t.kc;
    t.resume = k0 % block != 0;
    t.first_block = k0 < block;
    t.end = k1 == K ? TileEnd::kLast : k1 % block == 0 ? TileEnd::kBlock : TileEnd::kPartial;
    const float* next = nullptr;
    int64_t next_rows = 0;
    if (k1 < K) next = panel + k1 * kPanelWidth, next_rows = std::min(kChunk, K - k1);
    else if (then >= 0) next = p.w.base + then * p.w.panel_stride, next_rows = std::min(kChunk, K);
    const int64_t next_lines = next_rows * kPanelWidth * static_cast<int64_t>(sizeof(float)) / 64;
    int64_t m0 = 0;
    for (int64_t i = 0; i < row_tiles; ++i) {
      const int rows = static_cast<int>((M - m0 + row_tiles - i - 1) / (row_tiles - i));
      const int64_t l0 = next_lines * i / row_tiles, l1 = next_lines * (i + 1) / row_tiles;
      t.prefetch = next ? reinterpret_cast<const char*>(next) + l0 * 64 : nullptr;
      t.prefetch_lines = next ? l1 - l0 : 0;
      t.a = p.a + m0 * K + k0;
      t.part = part + m0 * kPanelWidth;
      t.sum = sum + m0 * kPanelWidth;
      t.y = p.y + m0 * p.N + n0;
      run_tile(t, rows);
      m0 += rows;
    }
  }
}

}  // namespace

void panel_gemm(const WeightPanels& w, int64_t K, int64_t N, const float* a, int64_t M, float* y,
                bool residual_in_y, const float* bias) {
  if (M <= 0 || N <= 0 || K <= 0) return;
  const Product p{w, K, N, M, a, y, residual_in_y, bias};
  const int64_t panels = (N + kPanelWidth - 1) / kPanelWidth;
  const int64_t threads = std::max(1, num_threads());
  parallel_for(panels, std::max<int64_t>(1, (panels + threads - 1) / threads), [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) run_panel(p, j, j + 1 < j1 ? j + 1 : -1);
  });
}

}  // namespace mminfer::kernels
