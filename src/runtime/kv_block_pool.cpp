#include "runtime/kv_block_pool.h"

#include <algorithm>

#include "mminfer/status.h"

namespace mminfer::runtime {

KvBlockPool::KvBlockPool(KvCache storage) : storage_(std::move(storage)), blocks_(static_cast<size_t>(storage_.rows())) {
  for (int64_t b = storage_.rows() - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

int32_t KvBlockPool::take() {
  int32_t b = -1;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!idle_.empty()) {
    b = idle_.begin()->second;
    idle_.erase(idle_.begin());
    forget(b);
  } else {
    return -1;
  }
  blocks_[b].holders = 1;
  blocks_[b].used = ++clock_;
  ++held_;
  return b;
}

void KvBlockPool::hold(int32_t b) {
  Block& x = blocks_.at(static_cast<size_t>(b));
  if (x.holders == 0) {
    if (x.key == 0) throw Error("KV block " + std::to_string(b) + " is free; take() it instead");
    idle_.erase({x.used, b});
    ++held_;
  }
  ++x.holders;
  x.used = ++clock_;
}

void KvBlockPool::give_back(int32_t b) {
  Block& x = blocks_.at(static_cast<size_t>(b));
  if (x.holders <= 0) throw Error("KV block " + std::to_string(b) + " given back more often than taken");
  if (--x.holders > 0) return;
  --held_;
  if (x.key != 0) idle_.insert({x.used, b});
  else free_.push_back(b);
}

uint64_t KvBlockPool::chain(uint64_t parent, std::span<const int64_t> positions) {
  uint64_t h = parent ^ 0x9e3779b97f4a7c15ull;  // FNV-1a over the parent and the positions' keys
  auto mix = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xff)) * 0x100000001b3ull;
  };
  mix(parent);
  for (int64_t p : positions) mix(static_cast<uint64_t>(p));
  return h == 0 ? 1 : h;  // 0 means unpublished
}

void KvBlockPool::publish(int32_t b, uint64_t parent, std::span<const int64_t> positions) {
  Block& x = blocks_.at(static_cast<size_t>(b));
  if (x.key != 0 || x.holders == 0) return;  // already published, or not a block someone wrote
  const uint64_t key = chain(parent, positions);
  if (!published_.emplace(key, b).second) return;
  x.key = key, x.parent = parent;
  x.positions.assign(positions.begin(), positions.end());
}

int32_t KvBlockPool::find(uint64_t parent, std::span<const int64_t> positions) {
  auto it = published_.find(chain(parent, positions));
  if (it == published_.end()) return -1;
  const Block& x = blocks_[it->second];
  if (x.parent != parent || !std::equal(x.positions.begin(), x.positions.end(), positions.begin(), positions.end())) return -1;
  hold(it->second);
  return it->second;
}

void KvBlockPool::forget(int32_t b) {
  Block& x = blocks_[b];
  if (x.key != 0) published_.erase(x.key);
  x.key = x.parent = 0;
  x.positions.clear();
}

}  // namespace mminfer::runtime
