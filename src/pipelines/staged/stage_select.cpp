#include "pipelines/staged/stage_select.h"

#include <cmath>
#include <cstring>
#include <string>

#include "mminfer/status.h"

namespace mminfer::staged {

namespace {

void require_logits(const Tensor& t) {
  if (t.dtype() != DType::kFloat32 || t.rank() < 2 || t.dim(t.rank() - 1) < 1)
    throw Error("a stage selecting by argmax or sample needs float32 [batch, ..., classes], not " +
                std::string(dtype_name(t.dtype())) + " " + shape_str(t.shape()));
}

Shape without_last(const Shape& s) { return Shape(s.begin(), s.end() - 1); }

// splitmix64: a small generator whose stream a seed and an input fix on every platform.
struct Mix {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};

size_t row_bytes(const Tensor& t) { return t.dim(0) ? t.nbytes() / static_cast<size_t>(t.dim(0)) : 0; }

}  // namespace

Tensor argmax_last(const Tensor& logits) {
  require_logits(logits);
  const int64_t c = logits.dim(logits.rank() - 1), rows = logits.numel() / c;
  Tensor out = Tensor::empty(DType::kInt64, without_last(logits.shape()));
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits.data<float>() + r * c;
    int64_t best = 0;
    for (int64_t k = 1; k < c; ++k)
      if (x[k] > x[best]) best = k;
    out.data<int64_t>()[r] = best;
  }
  return out;
}

Tensor sample_last(const Tensor& logits, double temperature, uint64_t seed, const std::vector<uint64_t>& item_ids,
                   uint64_t stream) {
  require_logits(logits);
  if (static_cast<int64_t>(item_ids.size()) != logits.dim(0)) throw Error("sample_last: one item id per input");
  const int64_t c = logits.dim(logits.rank() - 1), per_item = logits.numel() / c / logits.dim(0);
  Tensor out = Tensor::empty(DType::kInt64, without_last(logits.shape()));
  std::vector<double> p(static_cast<size_t>(c));
  for (int64_t n = 0; n < logits.dim(0); ++n) {
    Mix rng{seed * 0xd1342543de82ef95ull ^ item_ids[n] * 0x2545f4914f6cdd1dull ^ stream * 0x9e3779b97f4a7c15ull};
    for (int64_t r = 0; r < per_item; ++r) {
      const float* x = logits.data<float>() + (n * per_item + r) * c;
      float top = x[0];
      for (int64_t k = 1; k < c; ++k) top = std::max(top, x[k]);
      double sum = 0;
      for (int64_t k = 0; k < c; ++k) sum += p[k] = std::exp((static_cast<double>(x[k]) - top) / temperature);
      double u = rng.uniform() * sum;
      int64_t pick = c - 1;
      for (int64_t k = 0; k < c; ++k) {
        if (u < p[k]) {
          pick = k;
          break;
        }
        u -= p[k];
      }
      out.data<int64_t>()[n * per_item + r] = pick;
    }
  }
  return out;
}

std::vector<double> confidence(const Tensor& logits) {
  require_logits(logits);
  const int64_t n = logits.dim(0), c = logits.dim(logits.rank() - 1), per_item = logits.numel() / c / n;
  std::vector<double> out(static_cast<size_t>(n), 1.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < per_item; ++r) {
      const float* x = logits.data<float>() + (i * per_item + r) * c;
      float top = x[0];
      for (int64_t k = 1; k < c; ++k) top = std::max(top, x[k]);
      double sum = 0;
      for (int64_t k = 0; k < c; ++k) sum += std::exp(static_cast<double>(x[k]) - top);
      out[i] = std::min(out[i], 1.0 / sum);  // the largest probability: exp(0) / sum
    }
  return out;
}

Tensor take_rows(const Tensor& t, const std::vector<size_t>& items) {
  Shape shape = t.shape();
  shape[0] = static_cast<int64_t>(items.size());
  Tensor out = Tensor::empty(t.dtype(), shape);
  const size_t bytes = row_bytes(t);
  for (size_t k = 0; k < items.size(); ++k)
    std::memcpy(static_cast<char*>(out.raw()) + k * bytes, static_cast<const char*>(t.raw()) + items[k] * bytes, bytes);
  return out;
}

void put_rows(Tensor& dst, const Tensor& rows, const std::vector<size_t>& items) {
  const size_t bytes = row_bytes(dst);
  for (size_t k = 0; k < items.size(); ++k)
    std::memcpy(static_cast<char*>(dst.raw()) + items[k] * bytes, static_cast<const char*>(rows.raw()) + k * bytes, bytes);
}

Tensor repeat_row(const Tensor& row, int64_t n) {
  Shape shape{n};
  shape.insert(shape.end(), row.shape().begin(), row.shape().end());
  Tensor out = Tensor::empty(row.dtype(), shape);
  for (int64_t k = 0; k < n; ++k) std::memcpy(static_cast<char*>(out.raw()) + k * row.nbytes(), row.raw(), row.nbytes());
  return out;
}

Tensor cast_for_input(const Tensor& t, DType want, const std::string& what) {
  if (t.dtype() == want) return t;
  if (t.dtype() == DType::kInt64 && want == DType::kInt32) {
    Tensor out = Tensor::empty(want, t.shape());
    for (int64_t i = 0; i < t.numel(); ++i) out.data<int32_t>()[i] = static_cast<int32_t>(t.data<int64_t>()[i]);
    return out;
  }
  if (t.dtype() == DType::kInt64 && want == DType::kFloat32) {
    Tensor out = Tensor::empty(want, t.shape());
    for (int64_t i = 0; i < t.numel(); ++i) out.data<float>()[i] = static_cast<float>(t.data<int64_t>()[i]);
    return out;
  }
  throw Error(what + " is " + dtype_name(t.dtype()) + " but the model input takes " + dtype_name(want));
}

}  // namespace mminfer::staged
