#include "pipelines/generation/feature_cache.h"

#include <cstring>
#include <map>
#include <system_error>

#include "mminfer/status.h"
#include "serve/sha256.h"

namespace mminfer::pipelines {

namespace fs = std::filesystem;

namespace {

// dtype, rank, dims, then the bytes: what ResultCache keeps as an opaque value.
std::string serialize(const Tensor& t) {
  const int32_t dtype = static_cast<int32_t>(t.dtype()), rank = static_cast<int32_t>(t.rank());
  std::string out(sizeof dtype + sizeof rank + sizeof(int64_t) * rank + t.nbytes(), '\0');
  char* p = out.data();
  std::memcpy(p, &dtype, sizeof dtype), p += sizeof dtype;
  std::memcpy(p, &rank, sizeof rank), p += sizeof rank;
  std::memcpy(p, t.shape().data(), sizeof(int64_t) * rank), p += sizeof(int64_t) * rank;
  if (t.nbytes()) std::memcpy(p, t.raw(), t.nbytes());
  return out;
}

Tensor deserialize(const std::string& bytes) {
  int32_t dtype = 0, rank = 0;
  const char* p = bytes.data();
  std::memcpy(&dtype, p, sizeof dtype), p += sizeof dtype;
  std::memcpy(&rank, p, sizeof rank), p += sizeof rank;
  Shape shape(rank);
  std::memcpy(shape.data(), p, sizeof(int64_t) * rank), p += sizeof(int64_t) * rank;
  Tensor t = Tensor::empty(static_cast<DType>(dtype), shape);
  if (t.nbytes()) std::memcpy(t.raw(), p, t.nbytes());
  return t;
}

serve::CacheKey feature_key(const std::string& identity, const std::string& modality, const std::string& digest) {
  return serve::CacheKey{digest, modality, identity, "", "feature"};
}

}  // namespace

FeatureCache::FeatureCache(size_t byte_budget)
    : cache_([&] {
        serve::ResultCache::Options o;
        o.byte_budget = byte_budget;
        return o;
      }()) {}

std::optional<Tensor> FeatureCache::get(const serve::CacheKey& key) {
  serve::CacheValue v = cache_.get(key);
  if (!v) return std::nullopt;
  return deserialize(*v);
}

void FeatureCache::put(const serve::CacheKey& key, const Tensor& features) {
  cache_.put(key, std::make_shared<const std::string>(serialize(features)));
}

std::string content_digest(const Tensor& t) {
  serve::Sha256 h;
  const int32_t dtype = static_cast<int32_t>(t.dtype());
  h.update(&dtype, sizeof dtype);
  h.update(t.shape().data(), sizeof(int64_t) * t.shape().size());
  h.update(t.raw(), t.nbytes());
  return serve::to_hex(h.finish());
}

std::string content_digest(std::span<const float> samples) {
  serve::Sha256 h;
  const uint64_t n = samples.size();
  h.update(&n, sizeof n);
  h.update(samples.data(), samples.size_bytes());
  return serve::to_hex(h.finish());
}

std::string model_identity(const fs::path& file) {
  std::error_code ec;
  fs::path path = fs::weakly_canonical(file, ec);
  if (ec) path = file;
  std::string id = path.string();
  auto size = fs::file_size(file, ec);
  if (!ec) id += "|" + std::to_string(size);
  auto time = fs::last_write_time(file, ec);
  if (!ec) id += "|" + std::to_string(time.time_since_epoch().count());
  return id;
}

EncoderFeatures::EncoderFeatures(std::string identity)
    : identity_(std::move(identity)), cache_(std::make_shared<FeatureCache>()) {}

std::vector<Tensor> EncoderFeatures::rows(const std::string& modality, const std::vector<std::string>& digests,
                                          const EncodeFn& encode) {
  std::vector<Tensor> out(digests.size());
  std::vector<bool> filled(digests.size(), false);
  std::map<std::string, size_t> owner;  // digest -> the first item carrying it (with a cache only:
                                        // without one, every input is encoded as before)
  std::vector<size_t> missing;          // first items neither cached nor seen before
  for (size_t i = 0; i < digests.size(); ++i) {
    if (cache_ && !owner.emplace(digests[i], i).second) {
      ++counts_.reused;  // a duplicate within this call: its first item's row
      continue;
    }
    if (cache_) {
      if (auto hit = cache_->get(feature_key(identity_, modality, digests[i]))) {
        out[i] = std::move(*hit);
        filled[i] = true;
        ++counts_.reused;
        continue;
      }
    }
    missing.push_back(i);
  }
  if (!missing.empty()) {
    Tensor batch = encode(missing);
    if (batch.rank() == 0 || batch.dim(0) != static_cast<int64_t>(missing.size()))
      throw Error("the encoder gave " + std::to_string(batch.rank() ? batch.dim(0) : 0) + " rows for " +
                  std::to_string(missing.size()) + " inputs");
    counts_.encoded += missing.size();
    for (size_t r = 0; r < missing.size(); ++r) {
      Tensor row = batch_row(batch, static_cast<int64_t>(r));
      if (cache_) cache_->put(feature_key(identity_, modality, digests[missing[r]]), row);
      out[missing[r]] = std::move(row);
      filled[missing[r]] = true;
    }
  }
  for (size_t i = 0; i < digests.size(); ++i)
    if (!filled[i]) out[i] = out[owner.at(digests[i])];
  return out;
}

Tensor batch_row(const Tensor& batch, int64_t i) {
  Shape shape = batch.shape();
  shape[0] = 1;
  Tensor row = Tensor::empty(batch.dtype(), shape);
  const size_t bytes = row.nbytes();
  std::memcpy(row.raw(), static_cast<const char*>(batch.raw()) + bytes * i, bytes);
  return row;
}

Tensor stack_rows(const std::vector<Tensor>& rows) {
  if (rows.empty()) throw Error("no rows to stack");
  Shape shape = rows[0].shape();
  for (const Tensor& r : rows)
    if (r.shape() != shape || r.dtype() != rows[0].dtype())
      throw Error("encoder outputs of different shapes: " + shape_str(shape) + " and " + shape_str(r.shape()));
  shape[0] = static_cast<int64_t>(rows.size());
  Tensor batch = Tensor::empty(rows[0].dtype(), shape);
  char* p = static_cast<char*>(batch.raw());
  for (const Tensor& r : rows) std::memcpy(p, r.raw(), r.nbytes()), p += r.nbytes();
  return batch;
}

}  // namespace mminfer::pipelines
