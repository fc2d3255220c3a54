// The counting CPU allocator: counts what is allocated inside a scope, survives frees after
// the scope, and puts the previous allocator back.
#include "pipebal/profiler/cpu_memory.h"

#include <functional>
#include <thread>
#include <vector>

#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

namespace pipebal::profiler {
namespace {

TEST(CpuMemory, CountsTensorsAllocatedInsideTheScope) {
  c10::Allocator* before = c10::GetCPUAllocator();
  {
    CpuMemoryScope scope;
    EXPECT_NE(c10::GetCPUAllocator(), before);
    const int64_t base = scope.current_bytes();
    scope.reset_peak();
    {
      const at::Tensor a = torch::empty({1000}, torch::kFloat);  // 4000 bytes
      EXPECT_EQ(scope.current_bytes() - base, 4000);
      {
        const at::Tensor b = torch::empty({250}, torch::kDouble);  // 2000 bytes
        EXPECT_EQ(scope.current_bytes() - base, 6000);
      }
      EXPECT_EQ(scope.current_bytes() - base, 4000);
    }
    EXPECT_EQ(scope.current_bytes(), base);
    EXPECT_EQ(scope.peak_bytes() - base, 6000);
  }
  EXPECT_EQ(c10::GetCPUAllocator(), before);
}

TEST(CpuMemory, TensorsMayOutliveTheScope) {
  at::Tensor survivor;
  int64_t base = 0;
  {
    CpuMemoryScope scope;
    base = scope.current_bytes();
    survivor = torch::ones({64, 64});
    EXPECT_EQ(scope.current_bytes() - base, 64 * 64 * 4);
  }
  EXPECT_FLOAT_EQ(survivor.sum().item<float>(), 4096.0f);
  survivor = at::Tensor();  // freed through the counting allocator's deleter, after the scope
  CpuMemoryScope again;
  EXPECT_EQ(again.current_bytes(), base);
}

TEST(CpuMemory, NestedScopesRestoreOnlyAtTheOutermost) {
  c10::Allocator* before = c10::GetCPUAllocator();
  {
    CpuMemoryScope outer;
    c10::Allocator* counting = c10::GetCPUAllocator();
    { CpuMemoryScope inner; }
    EXPECT_EQ(c10::GetCPUAllocator(), counting);
  }
  EXPECT_EQ(c10::GetCPUAllocator(), before);
}

TEST(CpuMemory, CountersAreThreadSafe) {
  CpuMemoryScope scope;
  const int64_t base = scope.current_bytes();
  scope.reset_peak();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      CpuMemoryScope::set_thread_tag(10 + t);
      for (int i = 0; i < 2000; ++i) {
        const at::Tensor x = torch::empty({128 + i % 200 + t}, torch::kFloat);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(scope.current_bytes(), base);
  for (int t = 0; t < 4; ++t) {
    // Each thread held one tensor at a time, the largest of 327 + t floats.
    EXPECT_EQ(scope.current_bytes(10 + t), 0) << t;
    EXPECT_EQ(scope.peak_bytes(10 + t), (327 + t) * 4) << t;
  }
}

TEST(CpuMemory, ConvolutionRunsUnderTheCountingAllocator) {
  // oneDNN allocates through the raw interface; it must keep working while we count.
  CpuMemoryScope scope;
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(3, 8, 3).padding(1));
  const at::Tensor y = conv->forward(torch::randn({2, 3, 16, 16}));
  y.sum().backward();
  EXPECT_TRUE(conv->weight.grad().defined());
}

TEST(CpuMemory, TaggedThreadsAreCountedSeparatelyUntilFreedAnywhere) {
  CpuMemoryScope scope;
  const int64_t base = scope.current_bytes(5);
  scope.reset_peak();
  at::Tensor kept;
  std::thread worker([&] {
    CpuMemoryScope::set_thread_tag(5);
    kept = torch::empty({1000}, torch::kFloat);  // 4000 bytes, counted under tag 5
    { const at::Tensor transient = torch::empty({500}, torch::kFloat); }
  });
  worker.join();
  EXPECT_EQ(scope.current_bytes(5) - base, 4000);
  EXPECT_EQ(scope.peak_bytes(5) - base, 4000 + 2000);
  EXPECT_EQ(scope.current_bytes(6), 0);
  kept = at::Tensor();  // freed on another (untagged) thread: still tag 5's
  EXPECT_EQ(scope.current_bytes(5), base);
  EXPECT_THROW(CpuMemoryScope::set_thread_tag(CpuMemoryScope::kMaxTags), std::invalid_argument);
}

// Memory held outside the allocator (shared-memory messages) counts towards the thread that
// took it, until released from any thread.
TEST(CpuMemory, MemoryHeldOutsideTheAllocatorCountsUntilReleased) {
  CpuMemoryScope scope;
  const int64_t base = scope.current_bytes(7);
  scope.reset_peak();
  std::function<void()> release;
  std::thread worker([&] {
    CpuMemoryScope::set_thread_tag(7);
    release = CpuMemoryScope::count_held(1 << 20);
  });
  worker.join();
  EXPECT_EQ(scope.current_bytes(7) - base, 1 << 20);
  EXPECT_EQ(scope.peak_bytes(7) - base, 1 << 20);
  release();
  EXPECT_EQ(scope.current_bytes(7), base);
  EXPECT_EQ(scope.peak_bytes(7) - base, 1 << 20);
}

}  // namespace
}  // namespace pipebal::profiler
