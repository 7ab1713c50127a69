#include "kernels/cpu/common/strided_copy.h"

#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "core/parallel.h"
#include "kernels/cpu/common/kernel.h"

namespace mminfer::kernels::layout {

namespace {

constexpr int64_t kTile = 32;             // tile edge for transposes: 32x32 elements stay in L1
constexpr int64_t kBytesPerTask = 32768;  // below this a parallel task costs more than it saves

struct View {
  std::vector<int64_t> shape, src, dst;  // sizes, source strides, destination strides
};

// Drops unit dims and merges neighbours that are contiguous in both source and destination.
View coalesce(const Shape& out_shape, const std::vector<int64_t>& strides) {
  View v;
  for (size_t k = 0; k < out_shape.size(); ++k) {
    if (out_shape[k] == 1) continue;
    if (!v.shape.empty() && v.src.back() == strides[k] * out_shape[k]) {
      v.shape.back() *= out_shape[k];
      v.src.back() = strides[k];
      continue;
    }
    v.shape.push_back(out_shape[k]);
    v.src.push_back(strides[k]);
  }
  v.dst = contiguous_strides(v.shape);
  return v;
}

// Walks the multi-index of a subset of dims, tracking source and destination offsets.
struct Walker {
  std::vector<int64_t> size, src, dst, idx;
  int64_t src_off = 0, dst_off = 0;

  void seek(int64_t linear) {
    idx.assign(size.size(), 0);
    src_off = dst_off = 0;
    for (size_t k = size.size(); k-- > 0;) {
      idx[k] = linear % size[k];
      linear /= size[k];
      src_off += idx[k] * src[k];
      dst_off += idx[k] * dst[k];
    }
  }
  void next() {
    for (size_t k = size.size(); k-- > 0;) {
      src_off += src[k];
      dst_off += dst[k];
      if (++idx[k] < size[k]) return;
      src_off -= src[k] * size[k];
      dst_off -= dst[k] * size[k];
      idx[k] = 0;
    }
  }
};

template <typename T>
void copy_rows(const T* src, T* dst, const View& v, int64_t offset) {
  size_t r = v.shape.size();
  int64_t inner = v.shape[r - 1], step = v.src[r - 1];
  Walker outer{{v.shape.begin(), v.shape.end() - 1}, {v.src.begin(), v.src.end() - 1}, {v.dst.begin(), v.dst.end() - 1}, {}};
  int64_t rows = shape_numel(outer.size);
  int64_t grain = std::max<int64_t>(1, kBytesPerTask / static_cast<int64_t>(inner * sizeof(T)));
  parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
    Walker w = outer;
    w.seek(begin);
    for (int64_t row = begin; row < end; ++row, w.next()) {
      const T* s = src + offset + w.src_off;
      T* d = dst + w.dst_off;
      if (step == 1) {
        std::memcpy(d, s, static_cast<size_t>(inner) * sizeof(T));
      } else {
        for (int64_t j = 0; j < inner; ++j) d[j] = s[j * step];
      }
    }
  });
}

// 8x8 block of 4-byte elements: reads 8 source runs of 8 (unit stride along i), writes 8
// destination runs of 8 (unit stride along j), transposed in registers.
inline void transpose8x8(const uint32_t* s, int64_t s_step, uint32_t* d, int64_t d_step) {
  __m256 r[8], t[8];
  for (int q = 0; q < 8; ++q) r[q] = _mm256_loadu_ps(reinterpret_cast<const float*>(s + q * s_step));
  for (int q = 0; q < 8; q += 2) {
    t[q] = _mm256_unpacklo_ps(r[q], r[q + 1]);
    t[q + 1] = _mm256_unpackhi_ps(r[q], r[q + 1]);
  }
  for (int q = 0; q < 8; q += 4) {
    r[q] = _mm256_shuffle_ps(t[q], t[q + 2], 0x44);
    r[q + 1] = _mm256_shuffle_ps(t[q], t[q + 2], 0xEE);
    r[q + 2] = _mm256_shuffle_ps(t[q + 1], t[q + 3], 0x44);
    r[q + 3] = _mm256_shuffle_ps(t[q + 1], t[q + 3], 0xEE);
  }
  for (int q = 0; q < 4; ++q) {
    t[q] = _mm256_permute2f128_ps(r[q], r[q + 4], 0x20);
    t[q + 4] = _mm256_permute2f128_ps(r[q], r[q + 4], 0x31);
  }
  for (int q = 0; q < 8; ++q) _mm256_storeu_ps(reinterpret_cast<float*>(d + q * d_step), t[q]);
}

// One tile: dst[i * dk + j] = src[i + j * sl] for i in [i0, i1), j in [j0, j1).
template <typename T>
void copy_tile(const T* s, T* d, int64_t i0, int64_t i1, int64_t j0, int64_t j1, int64_t sl, int64_t dk) {
  int64_t i = i0;
  if constexpr (std::is_same_v<T, uint32_t>) {
    // Row order of the register block: r[q] holds source run j0+q, which becomes column q of
    // the output rows i..i+7.
    int64_t j8 = j0 + (j1 - j0) / 8 * 8;
    for (; i + 8 <= i1; i += 8) {
      for (int64_t j = j0; j < j8; j += 8) transpose8x8(s + i + j * sl, sl, d + i * dk + j, dk);
      for (int64_t ii = i; ii < i + 8; ++ii)
        for (int64_t j = j8; j < j1; ++j) d[ii * dk + j] = s[ii + j * sl];
    }
  }
  for (; i < i1; ++i) {
    const T* srow = s + i;
    T* drow = d + i * dk;
    for (int64_t j = j0; j < j1; ++j) drow[j] = srow[j * sl];
  }
}

// Source dim `k` has unit stride but the destination's last dim does not: copy in square
// tiles so both the reads along k and the writes along the last dim stay in cache.
template <typename T>
void copy_tiles(const T* src, T* dst, const View& v, size_t k, int64_t offset) {
  size_t r = v.shape.size(), last = r - 1;
  Walker outer;
  for (size_t d = 0; d < r; ++d) {
    if (d == k || d == last) continue;
    outer.size.push_back(v.shape[d]);
    outer.src.push_back(v.src[d]);
    outer.dst.push_back(v.dst[d]);
  }
  int64_t nk = v.shape[k], nl = v.shape[last], sl = v.src[last], dk = v.dst[k];
  int64_t tiles_k = (nk + kTile - 1) / kTile, tiles_l = (nl + kTile - 1) / kTile;
  int64_t units = shape_numel(outer.size) * tiles_k;
  int64_t grain = std::max<int64_t>(1, kBytesPerTask / static_cast<int64_t>(kTile * nl * sizeof(T)));
  parallel_for(units, grain, [&](int64_t begin, int64_t end) {
    Walker w = outer;
    w.seek(begin / tiles_k);
    int64_t tk = begin % tiles_k;
    for (int64_t u = begin; u < end; ++u) {
      const T* s = src + offset + w.src_off;
      T* d = dst + w.dst_off;
      int64_t i0 = tk * kTile, i1 = std::min(nk, i0 + kTile);
      for (int64_t tl = 0; tl < tiles_l; ++tl) {
        int64_t j0 = tl * kTile, j1 = std::min(nl, j0 + kTile);
        copy_tile(s, d, i0, i1, j0, j1, sl, dk);
      }
      if (++tk == tiles_k) {
        tk = 0;
        w.next();
      }
    }
  });
}

template <typename T>
void copy_typed(const void* src_raw, void* dst_raw, const Shape& out_shape, const std::vector<int64_t>& strides,
                int64_t offset) {
  const T* src = static_cast<const T*>(src_raw);
  T* dst = static_cast<T*>(dst_raw);
  if (shape_numel(out_shape) == 0) return;
  View v = coalesce(out_shape, strides);
  if (v.shape.empty()) {
    dst[0] = src[offset];
    return;
  }
  size_t last = v.shape.size() - 1;
  if (v.src[last] != 1) {
    for (size_t k = 0; k < last; ++k)
      if (v.src[k] == 1) return copy_tiles(src, dst, v, k, offset);
  }
  copy_rows(src, dst, v, offset);
}

template <typename T>
void copy_naive_typed(const void* src_raw, void* dst_raw, const Shape& out_shape, const std::vector<int64_t>& strides,
                      int64_t offset) {
  const T* src = static_cast<const T*>(src_raw);
  T* dst = static_cast<T*>(dst_raw);
  int64_t n = shape_numel(out_shape);
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, s = offset;
    for (size_t k = out_shape.size(); k-- > 0;) {
      s += (rem % out_shape[k]) * strides[k];
      rem /= out_shape[k];
    }
    dst[i] = src[s];
  }
}

std::vector<int64_t> permuted_strides(const Shape& in_shape, const std::vector<int64_t>& perm) {
  std::vector<int64_t> in_strides = contiguous_strides(in_shape), out(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) out[k] = in_strides[static_cast<size_t>(perm[k])];
  return out;
}

}  // namespace

std::vector<int64_t> contiguous_strides(const Shape& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    s[k] = acc;
    acc *= shape[k];
  }
  return s;
}

#define MMINFER_BY_ELEMENT_SIZE(fn, ...)                                          \
  switch (elem_size) {                                                            \
    case 1: return fn<uint8_t>(__VA_ARGS__);                                      \
    case 2: return fn<uint16_t>(__VA_ARGS__);                                     \
    case 4: return fn<uint32_t>(__VA_ARGS__);                                     \
    case 8: return fn<uint64_t>(__VA_ARGS__);                                     \
    default: fail("cannot copy elements of " + std::to_string(elem_size) + " bytes"); \
  }

void strided_copy(const void* src, void* dst, size_t elem_size, const Shape& out_shape,
                  const std::vector<int64_t>& strides, int64_t offset) {
  MMINFER_BY_ELEMENT_SIZE(copy_typed, src, dst, out_shape, strides, offset)
}

void strided_copy_naive(const void* src, void* dst, size_t elem_size, const Shape& out_shape,
                        const std::vector<int64_t>& strides, int64_t offset) {
  MMINFER_BY_ELEMENT_SIZE(copy_naive_typed, src, dst, out_shape, strides, offset)
}

#undef MMINFER_BY_ELEMENT_SIZE

Shape permuted_shape(const Shape& in_shape, const std::vector<int64_t>& perm) {
  Shape out(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) out[k] = in_shape[static_cast<size_t>(perm[k])];
  return out;
}

void transpose(const void* src, void* dst, size_t elem_size, const Shape& in_shape, const std::vector<int64_t>& perm) {
  strided_copy(src, dst, elem_size, permuted_shape(in_shape, perm), permuted_strides(in_shape, perm), 0);
}

void transpose_naive(const void* src, void* dst, size_t elem_size, const Shape& in_shape,
                     const std::vector<int64_t>& perm) {
  strided_copy_naive(src, dst, elem_size, permuted_shape(in_shape, perm), permuted_strides(in_shape, perm), 0);
}

}  // namespace mminfer::kernels::layout
