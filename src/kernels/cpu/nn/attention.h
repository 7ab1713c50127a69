// Scaled dot-product attention for one (batch, head): softmax(scale * Q·Kᵀ + mask)·V, computed
// a few query rows at a time so the Sq×Sk score matrix never exists in memory.
#pragma once
#include <cstdint>

namespace mminfer::kernels::attention {

struct Problem {
  const float* q;     // [sq, d], row stride q_stride
  const float* kt;    // Kᵀ: [d, sk], row stride kt_stride
  const float* v;     // [sk, dv], row stride v_stride
  const float* mask;  // additive [sq, sk] with row stride mask_row_stride (0: one row for all), or null
  float* out;         // [sq, dv], row stride out_stride
  int64_t sq, sk, d, dv;
  int64_t q_stride, kt_stride, v_stride, out_stride, mask_row_stride;
  float scale;
  bool causal;  // query i sees keys j <= i + (sk - sq)
  // kt holds K itself, [sk, d] with key j's row at kt + j * kt_stride (a cache's layout, read
  // without a transposed copy); only run_avx512 and run_reference take it.
  bool k_rows = false;
};

// Kᵀ[c][j] wherever Problem::kt keeps it.
inline float kt_at(const Problem& p, int64_t c, int64_t j) {
  return p.k_rows ? p.kt[j * p.kt_stride + c] : p.kt[c * p.kt_stride + j];
}

// Fast path (AVX2) and its plain twin; both give a uniform distribution for rows whose
// scores are all -inf, as the Softmax kernel does.
constexpr int kBlockRows = 6;  // query rows per tile: 6 rows x 16 keys fill 12 of 16 ymm registers
void run_avx2(const Problem& p, float* scratch);  // scratch: kBlockRows * sk floats
void run_reference(const Problem& p);
// The same with 512-bit tiles; only when cpu_features().avx512f.
void run_avx512(const Problem& p, float* scratch);
// Long attention without mask or causal cut, over blocks of keys with an online softmax
// (attention_blocked_avx512.cpp): near GEMM speed where run_avx512 streams every key per tile.
// Only when cpu_features().avx512f and blocked_applies(p); scratch as for run_avx512.
bool blocked_applies(const Problem& p);
void run_blocked_avx512(const Problem& p, float* scratch);

// Shared by the ISA variants. For query rows [i0, i0 + rows): the keys any of them can see
// (seen) and the keys their probabilities cover (used: all keys for a row that sees none).
struct BlockKeys {
  int64_t seen, used;
};
BlockKeys block_keys(const Problem& p, int64_t i0, int rows);
// Raw scores of those rows (kBlockRows rows of p.sk in `s`) -> probabilities, in place.
void softmax_rows(const Problem& p, int64_t i0, int rows, float* s);
// Additive mask values at or below this (-inf, or the float minimum PyTorch exports write) rule a
// key out: next to any key with a higher mask their exp underflows to exactly 0.
constexpr float kMaskedOut = -1e30f;
// Keys query row i may see (all but the causal cut and a tail the mask rules out), and its
// additive mask row (or null).
int64_t visible_keys(const Problem& p, int64_t i);
const float* mask_row(const Problem& p, int64_t i);

// Calls block.template operator()<R>(i0) for the query rows in tiles of kBlockRows, then the
// remainder, so each ISA variant's tile sizes stay compile-time constants.
template <typename Block>
void for_each_block(int64_t sq, Block&& block) {
  int64_t i0 = 0;
  for (; i0 + kBlockRows <= sq; i0 += kBlockRows) block.template operator()<kBlockRows>(i0);
  switch (sq - i0) {
    case 5: block.template operator()<5>(i0); break;
    case 4: block.template operator()<4>(i0); break;
    case 3: block.template operator()<3>(i0); break;
    case 2: block.template operator()<2>(i0); break;
    case 1: block.template operator()<1>(i0); break;
    default: break;
  }
}

}  // namespace mminfer::kernels::attention
