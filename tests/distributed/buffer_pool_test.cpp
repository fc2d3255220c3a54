// The buffer pool of the Gloo channel: a buffer is handed out again only once nothing but the
// pool refers to it (no view of it, nor a view of a view), then the smallest free one that holds
// the request; a request larger than every free buffer replaces a free one.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "pipebal/distributed/buffer_pool.h"

namespace {

using pipebal::distributed::BufferPool;

TEST(BufferPool, HandsOutExactlyTheBytesAskedForContiguous) {
  BufferPool pool;
  const at::Tensor buffer = pool.take(100);
  EXPECT_EQ(buffer.numel(), 100);
  EXPECT_EQ(buffer.scalar_type(), at::kByte);
  EXPECT_TRUE(buffer.is_contiguous());
}

TEST(BufferPool, ABufferIsReusedOnlyOnceNothingViewsIt) {
  BufferPool pool;
  at::Tensor first = pool.take(100);
  const void* first_memory = first.data_ptr();
  at::Tensor second = pool.take(100);
  EXPECT_NE(second.data_ptr(), first_memory) << "the first is still in use";
  EXPECT_EQ(pool.size(), 2u);

  at::Tensor inner = first.narrow(0, 10, 10);  // a view of the view keeps it busy
  first.reset();
  at::Tensor third = pool.take(100);
  EXPECT_NE(third.data_ptr(), first_memory);
  EXPECT_EQ(pool.size(), 3u);

  inner.reset();
  EXPECT_EQ(pool.take(50).data_ptr(), first_memory) << "free again, and large enough";
  EXPECT_EQ(pool.size(), 3u);
}

TEST(BufferPool, TakesTheSmallestFreeBufferAndReplacesOneTooSmall) {
  BufferPool pool;
  at::Tensor large = pool.take(1000);
  at::Tensor small = pool.take(100);
  const void* large_memory = large.data_ptr();
  const void* small_memory = small.data_ptr();
  large.reset();
  small.reset();
  EXPECT_EQ(pool.take(80).data_ptr(), small_memory);
  EXPECT_EQ(pool.take(500).data_ptr(), large_memory);
  const at::Tensor huge = pool.take(5000);
  EXPECT_EQ(huge.numel(), 5000);
  EXPECT_EQ(pool.size(), 2u) << "a free buffer too small was let go for it";
}

}  // namespace
