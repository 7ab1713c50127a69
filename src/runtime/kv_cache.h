// The keys and values of a decoder's layers for a set of sequences (rows) or the blocks of a pool
// (runtime/kv_block_pool.h), owned by the runtime:
// one buffer per layer and side, [rows, kv_heads, capacity, head_dim], preallocated once and
// written in place by mminfer::CachedAttention, in float32, float16 (half the memory; the
// attention widens rows as it reads them) or int8 (each position's vector as codes and its own
// scale, core/int8_rows.h: the last axis is head_dim + 4 bytes). Each row's valid length is kept here.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "mminfer/tensor.h"

namespace mminfer::runtime {

// A view of rows [row, row + count) of `t` along its first axis (sharing its storage).
Tensor rows_of(const Tensor& t, int64_t row, int64_t count);

// A sequence's place in a pool of cache blocks (a KvCache whose rows are the blocks, each of
// `capacity` positions): the blocks that hold its positions in order, and how many it holds.
struct BlockList {
  std::vector<int32_t> blocks;
  int64_t length = 0;
};

class KvCache {
 public:
  struct Layer {
    int64_t kv_heads = 0, head_dim = 0, value_dim = 0;
  };
  // Throws Error, before allocating anything, when the buffers would exceed `max_bytes`.
  KvCache(std::vector<Layer> layers, int64_t rows, int64_t capacity, DType dtype = DType::kFloat32,
          size_t max_bytes = kDefaultMaxBytes);
  static constexpr size_t kDefaultMaxBytes = size_t(8) << 30;

  int64_t rows() const { return rows_; }
  int64_t capacity() const { return capacity_; }
  size_t layers() const { return layers_.size(); }
  size_t bytes() const;
  // What one position costs over every layer, KV head and side (keys and values).
  static size_t bytes_per_position(const std::vector<Layer>& layers, DType dtype);
  DType dtype() const { return dtype_; }

  // Views of rows [row, row + count) of a layer's keys or values: [count, kv_heads, capacity, dim]
  // (dim + 4 for int8).
  Tensor keys(size_t layer, int64_t row, int64_t count) const;
  Tensor values(size_t layer, int64_t row, int64_t count) const;

  int64_t length(int64_t row) const { return lengths_[row]; }
  void set_length(int64_t row, int64_t length);
  // Forgets a row's positions from `length` on (proposals a speculative pass did not keep).
  void truncate(int64_t row, int64_t length);
  // Beam search: row r takes the contents of row sources[r] (each row's valid part only).
  void reorder(std::span<const int64_t> sources);
  // Copies positions [0, count) of a layer from present tensors [n, kv_heads, count, dim] into
  // rows [row, row + n) (an encoder-decoder's first step, run without the cache).
  void write(size_t layer, int64_t row, const Tensor& keys, const Tensor& values);

 private:
  Tensor view(const Tensor& buffer, int64_t row, int64_t count) const;
  // Elements of the buffer's last axis for vectors of `dim` values.
  int64_t width(int64_t dim) const;

  std::vector<Layer> layers_;
  int64_t rows_, capacity_;
  DType dtype_;
  std::vector<Tensor> keys_, values_;
  std::vector<int64_t> lengths_;
};

}  // namespace mminfer::runtime
