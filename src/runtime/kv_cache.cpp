#include "runtime/kv_cache.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/half.h"
#include "core/int8_rows.h"
#include "mminfer/status.h"

namespace mminfer::runtime {

Tensor rows_of(const Tensor& t, int64_t row, int64_t count) {
  Shape shape = t.shape();
  const int64_t per_row = t.numel() / std::max<int64_t>(shape.at(0), 1);
  shape[0] = count;
  auto* base = static_cast<char*>(const_cast<void*>(t.raw())) + row * per_row * dtype_size(t.dtype());
  return Tensor::alias(t, t.dtype(), shape, base);
}

namespace {

int64_t row_width(DType dtype, int64_t dim) { return dtype == DType::kInt8 ? int8_rows::bytes(dim) : dim; }

}  // namespace

size_t KvCache::bytes_per_position(const std::vector<Layer>& layers, DType dtype) {
  size_t total = 0;
  for (const Layer& l : layers)
    total += static_cast<size_t>(l.kv_heads * (row_width(dtype, l.head_dim) + row_width(dtype, l.value_dim))) * dtype_size(dtype);
  return total;
}

int64_t KvCache::width(int64_t dim) const { return row_width(dtype_, dim); }

KvCache::KvCache(std::vector<Layer> layers, int64_t rows, int64_t capacity, DType dtype, size_t max_bytes)
    : layers_(std::move(layers)), rows_(rows), capacity_(capacity), dtype_(dtype), lengths_(static_cast<size_t>(rows), 0) {
  if (rows <= 0 || capacity <= 0) throw Error("a KV cache needs at least one row and one position");
  if (dtype != DType::kFloat32 && dtype != DType::kFloat16 && dtype != DType::kInt8)
    throw Error("a KV cache holds float32, float16 or int8");
  double need = 0;  // in double: hostile sizes must not wrap around
  for (const Layer& l : layers_)
    need += static_cast<double>(rows) * static_cast<double>(capacity) * static_cast<double>(l.kv_heads) *
            static_cast<double>(width(l.head_dim) + width(l.value_dim)) * static_cast<double>(dtype_size(dtype));
  if (need > static_cast<double>(max_bytes)) {
    char text[160];
    std::snprintf(text, sizeof text, "the KV cache for %lld sequences of %lld positions needs %.2f GiB, over the %.2f GiB limit",
                  static_cast<long long>(rows), static_cast<long long>(capacity), need / (1 << 30),
                  static_cast<double>(max_bytes) / (1 << 30));
    throw Error(std::string(text) + ": ask for fewer new tokens or sequences");
  }
  for (const Layer& l : layers_) {
    keys_.push_back(Tensor::empty(dtype, {rows, l.kv_heads, capacity, width(l.head_dim)}));
    values_.push_back(Tensor::empty(dtype, {rows, l.kv_heads, capacity, width(l.value_dim)}));
  }
}

size_t KvCache::bytes() const {
  size_t total = 0;
  for (size_t i = 0; i < layers_.size(); ++i) total += keys_[i].nbytes() + values_[i].nbytes();
  return total;
}

Tensor KvCache::view(const Tensor& buffer, int64_t row, int64_t count) const {
  if (row < 0 || count <= 0 || row + count > rows_) throw Error("KV cache rows out of range");
  return rows_of(buffer, row, count);
}

Tensor KvCache::keys(size_t layer, int64_t row, int64_t count) const {
  return view(keys_.at(layer), row, count);
}

Tensor KvCache::values(size_t layer, int64_t row, int64_t count) const {
  return view(values_.at(layer), row, count);
}

void KvCache::set_length(int64_t row, int64_t length) {
  if (length < 0 || length > capacity_) throw Error("KV cache length out of range");
  lengths_.at(static_cast<size_t>(row)) = length;
}

void KvCache::truncate(int64_t row, int64_t length) {
  if (length < 0 || length > lengths_.at(static_cast<size_t>(row))) throw Error("a KV cache row cannot grow by truncation");
  lengths_[static_cast<size_t>(row)] = length;
}

void KvCache::reorder(std::span<const int64_t> sources) {
  if (static_cast<int64_t>(sources.size()) != rows_) throw Error("KV cache reorder needs one source per row");
  for (int64_t s : sources)
    if (s < 0 || s >= rows_) throw Error("KV cache reorder source out of range");
  // Rows that keep their own contents stay put. The others copy the valid positions of their
  // source, taken from a snapshot of just those sources (a row may be a source and a target).
  // An int8 row's scale sits after its codes, so it moves with them.
  std::vector<int64_t> lengths = lengths_;
  std::vector<int64_t> moved;
  for (int64_t r = 0; r < rows_; ++r)
    if (sources[r] != r) moved.push_back(r);
  if (moved.empty()) return;
  const size_t esize = dtype_size(dtype_);
  std::vector<char> snapshot;
  for (size_t layer = 0; layer < layers_.size(); ++layer) {
    for (int side = 0; side < 2; ++side) {
      const Tensor& buffer = side ? values_[layer] : keys_[layer];
      const int64_t dim = width(side ? layers_[layer].value_dim : layers_[layer].head_dim), heads = layers_[layer].kv_heads;
      const int64_t per_head = capacity_ * dim, per_row = heads * per_head;
      auto* base = static_cast<char*>(const_cast<void*>(buffer.raw()));
      // Snapshot each moved row's source, valid part only, packed per head.
      snapshot.clear();
      std::vector<size_t> at(moved.size());
      for (size_t m = 0; m < moved.size(); ++m) {
        int64_t s = sources[moved[m]];
        at[m] = snapshot.size();
        for (int64_t h = 0; h < heads; ++h) {
          const char* src = base + (s * per_row + h * per_head) * esize;
          snapshot.insert(snapshot.end(), src, src + lengths[s] * dim * esize);
        }
      }
      for (size_t m = 0; m < moved.size(); ++m) {
        int64_t r = moved[m], n = lengths[sources[r]] * dim;
        for (int64_t h = 0; h < heads; ++h)
          std::memcpy(base + (r * per_row + h * per_head) * esize, snapshot.data() + at[m] + h * n * esize, esize * n);
      }
    }
  }
  for (int64_t r = 0; r < rows_; ++r) lengths_[r] = lengths[sources[r]];
}

void KvCache::write(size_t layer, int64_t row, const Tensor& keys, const Tensor& values) {
  const Layer& l = layers_.at(layer);
  for (int side = 0; side < 2; ++side) {
    const Tensor& src = side ? values : keys;
    int64_t dim = side ? l.value_dim : l.head_dim;
    if (src.dtype() != DType::kFloat32 || src.rank() != 4 || src.dim(1) != l.kv_heads || src.dim(3) != dim ||
        src.dim(2) > capacity_ || row + src.dim(0) > rows_)
      throw Error("present " + std::string(side ? "values" : "keys") + " of layer " + std::to_string(layer) + " are " +
                  shape_str(src.shape()) + ", which does not fit the KV cache");
    Tensor dst = side ? this->values(layer, row, src.dim(0)) : this->keys(layer, row, src.dim(0));
    int64_t count = src.dim(2);
    for (int64_t n = 0; n < src.dim(0) * l.kv_heads; ++n) {
      const float* from = src.data<float>() + n * count * dim;
      if (dtype_ == DType::kFloat32) {
        std::memcpy(dst.data<float>() + n * capacity_ * dim, from, sizeof(float) * count * dim);
      } else if (dtype_ == DType::kInt8) {
        const int64_t w = width(dim);
        int8_t* to = dst.data<int8_t>() + n * capacity_ * w;
        for (int64_t i = 0; i < count; ++i) int8_rows::quantize(from + i * dim, dim, to + i * w);
      } else {
        uint16_t* to = dst.data<uint16_t>() + n * capacity_ * dim;
        for (int64_t i = 0; i < count * dim; ++i) to[i] = float_to_half(from[i]);
      }
    }
  }
}

}  // namespace mminfer::runtime
