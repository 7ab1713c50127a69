#include "core/weight_memory.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <new>

namespace mminfer {

namespace {

constexpr size_t kHugePage = size_t(2) << 20;
constexpr size_t kChunk = size_t(32) << 20;  // weights larger than a quarter of this get their own mapping
constexpr size_t kAlign = 64;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// One anonymous mapping, 2 MiB-aligned so that every huge page in it is usable.
class Chunk {
 public:
  explicit Chunk(size_t bytes) : size_(round_up(bytes, kHugePage)) {
    map_size_ = size_ + kHugePage;  // room to align the start
    void* p = mmap(nullptr, map_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    map_ = static_cast<char*>(p);
    base_ = reinterpret_cast<char*>(round_up(reinterpret_cast<uintptr_t>(map_), kHugePage));
    madvise(base_, size_, MADV_HUGEPAGE);  // advice only: without THP the pages stay 4 KiB
  }
  ~Chunk() { munmap(map_, map_size_); }
  Chunk(const Chunk&) = delete;
  Chunk& operator=(const Chunk&) = delete;

  char* base() const { return base_; }
  size_t size() const { return size_; }

 private:
  size_t size_, map_size_;
  char* map_ = nullptr;
  char* base_ = nullptr;
};

std::atomic<size_t> g_in_use{0};
std::mutex g_mu;

// The block's pointer, keeping its chunk mapped and counting its bytes while it lives.
std::shared_ptr<void> hand_out(std::shared_ptr<Chunk> chunk, void* p, size_t bytes) {
  g_in_use += bytes;
  return std::shared_ptr<void>(p, [chunk = std::move(chunk), bytes](void*) { g_in_use -= bytes; });
}
std::weak_ptr<Chunk> g_current;  // the chunk small weights are carved from
size_t g_used = 0;

}  // namespace

std::shared_ptr<void> allocate_weight_memory(size_t bytes) {
  bytes = round_up(bytes == 0 ? 1 : bytes, kAlign);
  if (bytes > kChunk / 4) {
    auto chunk = std::make_shared<Chunk>(bytes);
    void* p = chunk->base();
    return hand_out(std::move(chunk), p, bytes);
  }
  std::lock_guard<std::mutex> lock(g_mu);
  std::shared_ptr<Chunk> chunk = g_current.lock();
  if (!chunk || g_used + bytes > chunk->size()) {
    chunk = std::make_shared<Chunk>(kChunk);
    g_current = chunk;
    g_used = 0;
  }
  void* p = chunk->base() + g_used;
  g_used += bytes;
  return hand_out(std::move(chunk), p, bytes);
}

size_t weight_memory_in_use() { return g_in_use.load(); }

}  // namespace mminfer
