// Encoder outputs kept by content, so a second question about the same image (or the same 30 s of
// audio) skips the encoder. Storage is the server's ResultCache (bounded in bytes, LRU) and keys are
// its CacheKey with kind "feature": the SHA-256 of what the encoder is given (the preprocessed
// pixels; a Whisper window's samples) plus the model's identity. Hashing the preprocessed input
// rather than the file bytes means the preprocessing settings need no place in the key (they are
// in the pixels already) and two encodings of one picture share an entry; decoding and resizing
// run either way, and they cost little beside the encoder. One FeatureCache may serve several
// pipelines of one model (the server's one cache per model); it is thread-safe.
#pragma once
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "mminfer/tensor.h"
#include "serve/result_cache.h"

namespace mminfer::pipelines {

class FeatureCache {
 public:
  static constexpr size_t kDefaultBytes = size_t{256} << 20;
  explicit FeatureCache(size_t byte_budget = kDefaultBytes);

  // nullopt when absent. The tensor is the stored one's copy.
  std::optional<Tensor> get(const serve::CacheKey& key);
  void put(const serve::CacheKey& key, const Tensor& features);
  serve::CacheStats stats() const { return cache_.stats(); }
  size_t byte_budget() const { return cache_.options().byte_budget; }

 private:
  serve::ResultCache cache_;
};

// SHA-256 (hex) of a tensor's dtype, shape and bytes; of float samples.
std::string content_digest(const Tensor& t);
std::string content_digest(std::span<const float> samples);
// A model file's identity for keys: its canonical path, size and modification time, so a
// rewritten encoder never answers from an older one's features.
std::string model_identity(const std::filesystem::path& file);

// How a pipeline's encoder inputs were served, counted over its life.
// Atomic: a server's metrics read them while the pipeline's worker counts.
struct FeatureCounts {
  std::atomic<uint64_t> encoded{0};  // inputs that went through the encoder
  std::atomic<uint64_t> reused{0};   // inputs answered from the cache (or by a duplicate in the same call)
};

// What a pipeline holds to consult its cache: the cache (null: none), the model's identity and
// the counts.
class EncoderFeatures {
 public:
  explicit EncoderFeatures(std::string identity);
  void set_cache(std::shared_ptr<FeatureCache> cache) { cache_ = std::move(cache); }
  // A cache of its own holding up to `bytes` (0: none).
  void set_cache_bytes(size_t bytes) { cache_ = bytes ? std::make_shared<FeatureCache>(bytes) : nullptr; }
  void set_identity(std::string identity) { identity_ = std::move(identity); }
  const std::shared_ptr<FeatureCache>& cache() const { return cache_; }
  const FeatureCounts& counts() const { return counts_; }

  // The encoder's output rows ([1, ...] each) for inputs named by their content digests. Rows the
  // cache holds come from it; each distinct missing digest goes through `encode` once, together
  // (without a cache every input does, as if there were no cache at all):
  // encode(items) gets indices into `digests` and returns a batch with one row per item, in order.
  using EncodeFn = std::function<Tensor(const std::vector<size_t>& items)>;
  std::vector<Tensor> rows(const std::string& modality, const std::vector<std::string>& digests, const EncodeFn& encode);

 private:
  std::string identity_;
  std::shared_ptr<FeatureCache> cache_;
  FeatureCounts counts_;
};

// Row i of a batch as a [1, ...] tensor (a copy); rows of one shape stacked into a batch.
Tensor batch_row(const Tensor& batch, int64_t i);
Tensor stack_rows(const std::vector<Tensor>& rows);

}  // namespace mminfer::pipelines
