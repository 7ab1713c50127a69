#include "core/storage_pool.h"

#include <gtest/gtest.h>

#include "mminfer/tensor.h"

namespace mminfer {
namespace {

// A large tensor freed and allocated again at the same size gets the same block back (its pages
// already mapped), zeroed; small tensors are left to the heap.
TEST(StoragePool, ReusesLargeBlocksAndZeroesThem) {
  void* first = nullptr;
  {
    Tensor t = Tensor::empty(DType::kFloat32, {300, 1024});
    first = t.raw();
    t.data<float>()[7] = 5.f;
  }
  EXPECT_GE(pooled_storage_bytes(), size_t(300) * 1024 * 4);
  Tensor again = Tensor::empty(DType::kFloat32, {300, 1024});
  EXPECT_EQ(again.raw(), first);
  EXPECT_EQ(again.data<float>()[7], 0.f);
  const size_t held = pooled_storage_bytes();
  { Tensor small = Tensor::empty(DType::kFloat32, {16}); }
  EXPECT_EQ(pooled_storage_bytes(), held);
  // Two alive at once get two blocks.
  Tensor other = Tensor::empty(DType::kFloat32, {300, 1024});
  EXPECT_NE(other.raw(), again.raw());
}

}  // namespace
}  // namespace mminfer
