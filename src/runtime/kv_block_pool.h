// The blocks of a decoder's KV cache handed out to sequences: a pool of fixed-size blocks (a
// KvCache whose rows are the blocks) allocated once under a byte budget. A sequence takes blocks
// as it grows and gives them back when it ends. A full block may be published under its prefix
// key (what its positions and every position before it hold), so a later prompt that starts the
// same way shares the block instead of computing it again. A published block nobody holds stays
// cached until a block is needed and none is free; then the least recently used one goes.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/kv_cache.h"

namespace mminfer::runtime {

class KvBlockPool {
 public:
  explicit KvBlockPool(KvCache storage);

  KvCache& storage() { return storage_; }
  int64_t block_size() const { return storage_.capacity(); }
  int64_t blocks() const { return storage_.rows(); }
  int64_t held() const { return held_; }  // by at least one sequence
  int64_t cached() const { return static_cast<int64_t>(idle_.size()); }  // published, held by none
  int64_t available() const { return blocks() - held_; }  // free or cached: what take() can give

  // A block for one holder to write: a free one, else the least recently used cached one (its
  // prefix forgotten); -1 when every block is held.
  int32_t take();
  // One more holder of a block someone holds or a cached one.
  void hold(int32_t block);
  // One holder less; a block nobody holds becomes free, or cached when it is published.
  void give_back(int32_t block);

  // The key of a block's positions after the block whose key is `parent` (0 for the first).
  static uint64_t chain(uint64_t parent, std::span<const int64_t> positions);
  // `block`, full, holds the positions `positions` after the block keyed `parent`; later prompts
  // find it under chain(parent, positions). A key already published keeps its first block.
  void publish(int32_t block, uint64_t parent, std::span<const int64_t> positions);
  // The published block for these positions after `parent`, held for the caller; -1 when none.
  int32_t find(uint64_t parent, std::span<const int64_t> positions);

 private:
  struct Block {
    int32_t holders = 0;
    uint64_t key = 0, parent = 0;  // key 0: unpublished
    std::vector<int64_t> positions;  // what the key stands for, checked on every find
    uint64_t used = 0;
  };
  void forget(int32_t block);

  KvCache storage_;
  std::vector<Block> blocks_;
  std::vector<int32_t> free_;
  std::set<std::pair<uint64_t, int32_t>> idle_;  // cached blocks by last use
  std::unordered_map<uint64_t, int32_t> published_;
  int64_t held_ = 0;
  uint64_t clock_ = 0;
};

}  // namespace mminfer::runtime
