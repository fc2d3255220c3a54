// The CPU allocator's guard: what it refuses (against the memory it is told of), and that LibTorch
// allocates through it once installed.
#include "pipebal/workflow/cpu_memory_guard.h"

#include <cstdint>
#include <string>

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include "pipebal/common/cgroups.h"

namespace pipebal::workflow {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

TEST(CpuMemoryGuard, RefusesOneTensorLargerThanMemoryAndSwap) {
  const std::string memory = "this machine's memory (16.00 GiB)";
  EXPECT_EQ(allocation_refusal(size_t{4} << 40, 0, 16 * kGiB, memory, 0),
            "cannot allocate 4.00 TiB for one tensor: more than this machine's memory "
            "(16.00 GiB)");
  EXPECT_EQ(allocation_refusal(size_t{20} << 30, std::nullopt, 16 * kGiB, memory, 2 * kGiB),
            "cannot allocate 20.00 GiB for one tensor: more than this machine's memory "
            "(16.00 GiB) and swap (2.00 GiB)");
  EXPECT_EQ(allocation_refusal(size_t{17} << 30, std::nullopt, 16 * kGiB, memory, 2 * kGiB),
            std::nullopt)
      << "swap counts";
  EXPECT_EQ(allocation_refusal(size_t{16} << 30, std::nullopt, 16 * kGiB, memory, 0), std::nullopt)
      << "exactly the memory";
}

TEST(CpuMemoryGuard, RefusesATensorThatWouldPassMemoryWithThoseHeld) {
  const std::string memory = "the memory pipebal's control group may use (8.00 GiB)";
  EXPECT_EQ(allocation_refusal(size_t{5} << 30, size_t{4} << 30, 8 * kGiB, memory, 0),
            "cannot allocate 5.00 GiB for a tensor: with the 4.00 GiB this process holds "
            "already, more than the memory pipebal's control group may use (8.00 GiB)");
  EXPECT_EQ(allocation_refusal(size_t{4} << 30, size_t{4} << 30, 8 * kGiB, memory, 0),
            std::nullopt);
  EXPECT_EQ(allocation_refusal(size_t{5} << 30, std::nullopt, 8 * kGiB, memory, 0), std::nullopt)
      << "what is held not known: only the tensor itself is weighed";
  EXPECT_EQ(allocation_refusal(size_t{5} << 30, size_t{4} << 30, 0, "", 0), std::nullopt)
      << "the memory not known: nothing is refused";
}

TEST(CpuMemoryGuard, LibTorchAllocatesThroughIt) {
  guard_cpu_allocations();
  const double too_many = 2 * usable_memory_bytes() + 1024 * kGiB;
  try {
    at::empty({static_cast<int64_t>(too_many)}, at::kByte);
    ADD_FAILURE() << "allocated more than the machine has";
  } catch (const c10::OutOfMemoryError& error) {
    EXPECT_EQ(std::string(error.what_without_backtrace()).rfind("cannot allocate ", 0), 0u)
        << error.what_without_backtrace();
  }
  const at::Tensor fits = at::ones({1024}, at::kFloat);
  EXPECT_EQ(fits.sum().item<float>(), 1024.0f);
  // The raw interface (a pointer and the allocator's own deleter) passes through to LibTorch's.
  c10::Allocator* allocator = c10::GetCPUAllocator();
  ASSERT_NE(allocator->raw_deleter(), nullptr);
  void* raw = allocator->raw_allocate(4096);
  ASSERT_NE(raw, nullptr);
  static_cast<char*>(raw)[4095] = 1;
  allocator->raw_deallocate(raw);
}

}  // namespace
}  // namespace pipebal::workflow
