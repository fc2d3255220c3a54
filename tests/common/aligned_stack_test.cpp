// Code run through on_aligned_stack starts at one stack alignment from any caller's depth, and
// the offset moves it by exactly that many bytes.
#include "pipebal/common/aligned_stack.h"

#include <cstdint>
#include <cstdlib>
#include <set>
#include <stdexcept>

#include <gtest/gtest.h>

namespace pipebal {
namespace {

// Where the stack is inside the callee: the address of its frame.
__attribute__((noinline)) uintptr_t stack_here() {
  return reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
}

// stack_here() called `depth` bytes further down the stack than at depth 0, at `offset` (or in
// place when it is negative), modulo 64. Without AddressSanitizer's red zones around alloca.
__attribute__((noinline, no_sanitize_address)) uintptr_t position_from(int depth, int offset) {
  volatile char* below = static_cast<char*>(__builtin_alloca(static_cast<size_t>(depth)));
  if (depth > 0) below[0] = 0;
  uintptr_t seen = 0;
  if (offset < 0) {
    seen = stack_here();
  } else {
    auto body = [](void* out) { *static_cast<uintptr_t*>(out) = stack_here(); };
    run_at_stack_offset(offset, body, &seen);
  }
  return seen % 64;
}

constexpr int kDepths[] = {0, 16, 32, 48, 64, 80, 96, 112};

TEST(AlignedStack, CalleesStartAtOneAlignmentFromAnyDepth) {
  std::set<uintptr_t> in_place, aligned;
  for (int depth : kDepths) {
    in_place.insert(position_from(depth, -1));
    aligned.insert(position_from(depth, 0));
  }
  EXPECT_EQ(in_place.size(), 4u) << "in place, the callee moves with its caller's depth";
  EXPECT_EQ(aligned.size(), 1u);
}

TEST(AlignedStack, TheOffsetMovesTheCalleeByThatManyBytes) {
  const uintptr_t at_zero = position_from(0, 0);
  for (int offset : {16, 32, 48}) {
    for (int depth : kDepths) {
      EXPECT_EQ(position_from(depth, offset), (at_zero + 64 - offset) % 64)
          << "offset " << offset << ", depth " << depth;
    }
  }
}

TEST(AlignedStack, OnAlignedStackRunsTheBodyOnceWithItsCaptures) {
  int calls = 0;
  on_aligned_stack([&] { ++calls; });
  EXPECT_EQ(calls, 1);
  // The body's exceptions reach the caller.
  EXPECT_THROW(on_aligned_stack([] { throw std::runtime_error("from the body"); }),
               std::runtime_error);
}

TEST(AlignedStack, OffsetsOtherThanWholeSixteenthsUnderALineAreRefused) {
  auto body = [](void*) {};
  for (int offset : {-16, 8, 64}) {
    EXPECT_THROW(run_at_stack_offset(offset, body, nullptr), std::invalid_argument) << offset;
  }
}

TEST(AlignedStack, TheDefaultIsZeroBytesUnlessTheEnvironmentSaysOtherwise) {
  if (std::getenv("PIPEBAL_STACK_OFFSET") != nullptr) GTEST_SKIP() << "set in the environment";
  ASSERT_TRUE(stack_offset().has_value());
  EXPECT_EQ(*stack_offset(), 0);
}

}  // namespace
}  // namespace pipebal
