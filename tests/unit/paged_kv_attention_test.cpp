// Attention over a paged KV cache (kernels/cpu/nn/kv_rows.h): the same rows spread over shuffled
// blocks of a pool, read through a block table, give the outputs of the contiguous cache (up to
// the rounding of sums taken block by block), and the step's new rows land in the blocks the
// table names. For mminfer::CachedAttention and for GroupQueryAttention bound in place, with
// float32, float16 and int8 caches.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/int8_rows.h"
#include "kernel_run.h"

using mminfer::Attributes;
using mminfer::DType;
using mminfer::Tensor;
using mminfer::testing::normal;
using mminfer::testing::run_kernel;

namespace {

Tensor floats(std::vector<int64_t> shape, unsigned seed) {
  Tensor t = Tensor::empty(DType::kFloat32, shape);
  auto v = normal(static_cast<size_t>(t.numel()), seed);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

int64_t row_bytes(DType dtype, int64_t dim) {
  return dtype == DType::kInt8 ? mminfer::int8_rows::bytes(dim) : dim * int64_t(mminfer::dtype_size(dtype));
}

// A contiguous cache [B, H, T, width] of `dtype` whose every row holds a random vector.
Tensor random_cache(DType dtype, int64_t B, int64_t H, int64_t T, int64_t dim, unsigned seed) {
  const int64_t rows = B * H * T, width = dtype == DType::kInt8 ? mminfer::int8_rows::bytes(dim) : dim;
  Tensor c = Tensor::empty(dtype, {B, H, T, width});
  auto x = normal(static_cast<size_t>(rows * dim), seed);
  for (int64_t r = 0; r < rows; ++r) {
    const float* v = x.data() + r * dim;
    char* at = static_cast<char*>(const_cast<void*>(c.raw())) + r * row_bytes(dtype, dim);
    if (dtype == DType::kInt8) {
      mminfer::int8_rows::quantize(v, dim, reinterpret_cast<int8_t*>(at));
    } else if (dtype == DType::kFloat16) {
      for (int64_t i = 0; i < dim; ++i) reinterpret_cast<uint16_t*>(at)[i] = mminfer::float_to_half(v[i]);
    } else {
      std::memcpy(at, v, sizeof(float) * dim);
    }
  }
  return c;
}

// The blocks of each sequence, shuffled over a pool with `spare` blocks nobody holds.
struct Paging {
  int64_t B, W, block, blocks;
  std::vector<int32_t> ids;  // [B, W]
  Tensor table;
};

Paging make_paging(int64_t B, int64_t W, int64_t block, int64_t spare, unsigned seed) {
  Paging p{B, W, block, B * W + spare, {}, Tensor::empty(DType::kInt32, {B, W})};
  std::vector<int32_t> all(static_cast<size_t>(p.blocks));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), std::mt19937(seed));
  p.ids.assign(all.begin(), all.begin() + B * W);
  std::copy(p.ids.begin(), p.ids.end(), p.table.data<int32_t>());
  return p;
}

// Where (b, h, pos) of a contiguous [B, H, T, width] cache and of the pool lie.
const char* contiguous_row(const Tensor& c, int64_t b, int64_t h, int64_t pos, int64_t bytes) {
  return static_cast<const char*>(c.raw()) + ((b * c.dim(1) + h) * c.dim(2) + pos) * bytes;
}
char* pool_row(const Tensor& pool, const Paging& p, int64_t b, int64_t h, int64_t pos, int64_t bytes) {
  const int64_t block = p.ids[static_cast<size_t>(b * p.W + pos / p.block)];
  return static_cast<char*>(const_cast<void*>(pool.raw())) + ((block * pool.dim(1) + h) * p.block + pos % p.block) * bytes;
}

// The contiguous cache's rows copied into a pool [blocks, H, block, width] as the paging lays them.
Tensor paged_copy(const Tensor& c, const Paging& p, int64_t dim) {
  const int64_t bytes = row_bytes(c.dtype(), dim), H = c.dim(1);
  Tensor pool = Tensor::empty(c.dtype(), {p.blocks, H, p.block, c.dim(3)});
  std::memset(const_cast<void*>(pool.raw()), 0x55, static_cast<size_t>(pool.numel()) * mminfer::dtype_size(c.dtype()));
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t pos = 0; pos < c.dim(2); ++pos) std::memcpy(pool_row(pool, p, b, h, pos, bytes), contiguous_row(c, b, h, pos, bytes), bytes);
  return pool;
}

void expect_same_rows(const Tensor& c, const Tensor& pool, const Paging& p, int64_t dim, const std::vector<int64_t>& upto) {
  const int64_t bytes = row_bytes(c.dtype(), dim);
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < c.dim(1); ++h)
      for (int64_t pos = 0; pos < upto[b]; ++pos)
        ASSERT_EQ(0, std::memcmp(pool_row(pool, p, b, h, pos, bytes), contiguous_row(c, b, h, pos, bytes), bytes))
            << "sequence " << b << " head " << h << " position " << pos;
}

void expect_equal(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.numel(); ++i)  // the value sums run block by block: rounding may differ
    ASSERT_NEAR(a.data<float>()[i], b.data<float>()[i], 1e-5f * (1 + std::fabs(b.data<float>()[i]))) << "element " << i;
}

TEST(PagedKvAttention, CachedAttentionThroughABlockTableEqualsContiguous) {
  const int64_t B = 3, Hkv = 2, Hq = 4, D = 16, block = 4, W = 6, T = block * W;
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kInt8})
    for (int64_t S : {1, 5}) {
      SCOPED_TRACE(std::string(mminfer::dtype_name(dtype)) + ", " + std::to_string(S) + " new positions");
      Tensor q = floats({B, Hq, S, D}, 1), k = floats({B, Hkv, S, D}, 2), v = floats({B, Hkv, S, D}, 3);
      Tensor kc = random_cache(dtype, B, Hkv, T, D, 4), vc = random_cache(dtype, B, Hkv, T, D, 5);
      Paging p = make_paging(B, W, block, 5, 6);
      Tensor kp = paged_copy(kc, p, D), vp = paged_copy(vc, p, D);
      Tensor lengths = Tensor::empty(DType::kInt64, {B});
      const std::vector<int64_t> held = {0, 7, 13};  // within a block, at a block's start, across blocks
      std::vector<int64_t> after;
      for (int64_t b = 0; b < B; ++b) lengths.data<int64_t>()[b] = held[b], after.push_back(held[b] + S);
      Attributes a;
      a.set("causal", int64_t{1});
      auto want = run_kernel("CachedAttention", "mminfer", 1, a, {&q, &k, &v, &kc, &vc, &lengths}, 1);
      auto got = run_kernel("CachedAttention", "mminfer", 1, a, {&q, &k, &v, &kp, &vp, &lengths, &p.table}, 1);
      expect_equal(got[0], want[0]);
      expect_same_rows(kc, kp, p, D, after);
      expect_same_rows(vc, vp, p, D, after);
    }
}

TEST(PagedKvAttention, ABlockOutsideThePoolIsRefusedByName) {
  const int64_t B = 1, H = 1, D = 8, block = 4;
  Tensor q = floats({B, H, 1, D}, 1), k = floats({B, H, 1, D}, 2), v = floats({B, H, 1, D}, 3);
  Tensor kp = Tensor::empty(DType::kFloat32, {2, H, block, D}), vp = Tensor::empty(DType::kFloat32, {2, H, block, D});
  Tensor lengths = Tensor::empty(DType::kInt64, {B});
  lengths.data<int64_t>()[0] = 5;  // the next position is in the second block
  Tensor table = Tensor::empty(DType::kInt32, {B, 2});
  table.data<int32_t>()[0] = 0, table.data<int32_t>()[1] = 7;
  Attributes a;
  try {
    run_kernel("CachedAttention", "mminfer", 1, a, {&q, &k, &v, &kp, &vp, &lengths, &table}, 1);
    FAIL() << "a block outside the pool was read";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("block 7 of sequence 0 is outside the pool of 2 blocks"), std::string::npos) << e.what();
  }
}

TEST(PagedKvAttention, GroupQueryAttentionInPlaceThroughABlockTableEqualsContiguous) {
  const int64_t B = 2, N = 4, NK = 2, H = 16, block = 4, W = 4, P = block * W;
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kInt8}) {
    SCOPED_TRACE(mminfer::dtype_name(dtype));
    Tensor q = floats({B, 1, N * H}, 1), k = floats({B, 1, NK * H}, 2), v = floats({B, 1, NK * H}, 3);
    Tensor kc = random_cache(dtype, B, NK, P, H, 4), vc = random_cache(dtype, B, NK, P, H, 5);
    Paging p = make_paging(B, W, block, 3, 7);
    Tensor kp = paged_copy(kc, p, H), vp = paged_copy(vc, p, H);
    const std::vector<int64_t> held = {3, 9};
    Tensor seqlens = Tensor::empty(DType::kInt32, {B}), total = Tensor::empty(DType::kInt32, {});
    for (int64_t b = 0; b < B; ++b) seqlens.data<int32_t>()[b] = static_cast<int32_t>(held[b]);
    total.data<int32_t>()[0] = 10;
    Attributes a;
    a.set("num_heads", N);
    a.set("kv_num_heads", NK);
    a.set("mminfer_cache_in_place", int64_t{1});
    a.set("mminfer_block_table_input", int64_t{12});
    auto want = run_kernel("GroupQueryAttention", "com.microsoft", 1, a, {&q, &k, &v, &kc, &vc, &seqlens, &total}, 1);
    std::vector<const Tensor*> paged = {&q, &k, &v, &kp, &vp, &seqlens, &total};
    paged.resize(12, nullptr);
    paged.push_back(&p.table);
    auto got = run_kernel("GroupQueryAttention", "com.microsoft", 1, a, paged, 1);
    expect_equal(got[0], want[0]);
    expect_same_rows(kc, kp, p, H, {held[0] + 1, held[1] + 1});
    expect_same_rows(vc, vp, p, H, {held[0] + 1, held[1] + 1});
  }
}

}  // namespace
