// Where a runtime-owned KV cache keeps the rows of (sequence b, KV head h) at position p:
// contiguous, [B, Hkv, T, width] with sequence b in slot b, or paged, [blocks, Hkv, block, width]
// with a block table (int32 [B, table_width]) naming each sequence's blocks in order, so position
// p is row p % block of block table[b][p / block]. Attention reads a sequence's rows in place, run
// by run (cached_attention::Rows::k_blocks), or widens a float16 cache's runs into one buffer.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/nn/cached_attention.h"
#include "mminfer/tensor.h"

namespace mminfer::kernels {

struct KvRows {
  char* base = nullptr;
  int64_t row_bytes = 0;  // bytes of one position's vector
  int64_t heads = 0;      // KV heads
  int64_t block = 0;      // positions per block (the capacity T when contiguous)
  const int32_t* table = nullptr;  // null: contiguous
  int64_t table_width = 1;

  int64_t capacity() const { return block * table_width; }

  char* row(int64_t b, int64_t h, int64_t pos) const {
    const int64_t slot = table ? table[b * table_width + pos / block] : b;
    return base + ((slot * heads + h) * block + pos % block) * row_bytes;
  }

  // Calls fn(rows, first, count) for each run of rows [0, n) of (b, h) that lies in one block.
  template <class Fn>
  void for_each_run(int64_t b, int64_t h, int64_t n, Fn&& fn) const {
    for (int64_t first = 0; first < n; first += block) fn(row(b, h, first), first, std::min(block, n - first));
  }

  // Where each block's share of rows [0, n) of (b, h) starts, in order; empty when the rows lie
  // one after another from row(b, h, 0) (a contiguous cache, or one block).
  void block_starts(int64_t b, int64_t h, int64_t n, std::vector<const void*>& starts) const {
    starts.clear();
    if (!table || n <= block) return;
    for (int64_t first = 0; first < n; first += block) starts.push_back(row(b, h, first));
  }
};

// A cache tensor's rows: contiguous [B, heads, block, width] without a table, else a pool
// [blocks, heads, block, width] read through `table` ([B, table_width]). `dim`: the vectors' values.
KvRows kv_rows(const Tensor& cache, int64_t dim, int64_t heads, const int32_t* table, int64_t table_width);

// One position's vector of `dim` floats into its cache row: copied, narrowed to float16, or
// quantized as int8 codes and a scale (core/int8_rows.h), as `dtype` says.
void store_row(char* row, const float* x, int64_t dim, DType dtype);

// Rows [0, n) of (b, h) of a float16 cache, `dim` halves each, widened into `buffer` one after
// another (32-byte aligned for vector loads); returns where.
const float* widen_rows(const KvRows& rows, int64_t b, int64_t h, int64_t n, int64_t dim, std::vector<float>& buffer);

// What attention reads for a KV head, a cache's keys and values: float16 rows widened into
// buffers of its own, the others in place (one run, or block by block when paged). One per
// thread; the last head pointed at is kept, so query heads that share it read it once.
class KvReader {
 public:
  KvReader(KvRows keys, KvRows values, DType dtype, int64_t key_dim, int64_t value_dim)
      : keys_(keys), values_(values), dtype_(dtype), dk_(key_dim), dv_(value_dim) {}
  // Sets p's keys and values (k/v, k8/v8 or k_blocks/v_blocks, with strides) to rows [0, n) of (b, h).
  void point(cached_attention::Rows& p, int64_t b, int64_t h, int64_t n);

 private:
  KvRows keys_, values_;
  DType dtype_;
  int64_t dk_, dv_;
  std::vector<float> wide_k_, wide_v_;
  std::vector<const void*> k_starts_, v_starts_;
  int64_t at_b_ = -1, at_h_ = -1, at_n_ = -1;
  cached_attention::Rows view_{};  // the cache's part of a Rows for (at_b_, at_h_)
};

// Empty when a block table of `width` entries per sequence can hold needed[b] positions of each
// sequence with blocks of a pool of `blocks`; else why not (checked before any thread starts).
inline std::string check_block_table(const int32_t* table, int64_t width, int64_t block, int64_t blocks,
                                     const std::vector<int64_t>& needed) {
  for (size_t b = 0; b < needed.size(); ++b) {
    const int64_t used = (needed[b] + block - 1) / block;
    if (used > width)
      return "sequence " + std::to_string(b) + " needs " + std::to_string(needed[b]) + " positions, more than its " +
             std::to_string(width) + " blocks of " + std::to_string(block) + " hold";
    for (int64_t i = 0; i < used; ++i) {
      const int32_t at = table[static_cast<int64_t>(b) * width + i];
      if (at < 0 || at >= blocks)
        return "block " + std::to_string(at) + " of sequence " + std::to_string(b) + " is outside the pool of " +
               std::to_string(blocks) + " blocks";
    }
  }
  return {};
}

}  // namespace mminfer::kernels
