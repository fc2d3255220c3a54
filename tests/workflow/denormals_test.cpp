// workflow::flush_denormals_unless_kept: subnormal results become zero on the calling thread, in
// threads it starts afterwards and in LibTorch's kernels, unless PIPEBAL_KEEP_DENORMALS says no.
#include "pipebal/workflow/denormals.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <thread>

#include <ATen/ATen.h>

#include "pipebal/profiler/environment.h"

namespace pipebal::workflow {
namespace {

constexpr float kSmallestNormal = std::numeric_limits<float>::min();

// Every test starts and ends with subnormals kept and the variable unset.
class Denormals : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!at::globalContext().setFlushDenormal(true)) GTEST_SKIP() << "no flush-to-zero mode here";
    restore();
  }
  void TearDown() override { restore(); }
  static void restore() {
    unsetenv(kKeepDenormalsVariable);
    at::globalContext().setFlushDenormal(false);
  }
};

// Half the smallest normal float, computed by a LibTorch kernel on this thread.
float halved_by_libtorch() {
  return (at::full({8}, kSmallestNormal) * 0.5f).max().item<float>();
}

TEST_F(Denormals, FlushedHereInThreadsStartedLaterAndInLibTorchKernels) {
  ASSERT_FALSE(profiler::denormals_flushed());
  ASSERT_EQ(halved_by_libtorch(), kSmallestNormal / 2);  // subnormal, kept

  EXPECT_TRUE(flush_denormals_unless_kept());
  EXPECT_TRUE(profiler::denormals_flushed());
  EXPECT_EQ(halved_by_libtorch(), 0.0f);
  bool flushed_in_thread = false;
  float halved_in_thread = -1;
  std::thread later([&] {
    flushed_in_thread = profiler::denormals_flushed();
    halved_in_thread = halved_by_libtorch();
  });
  later.join();
  EXPECT_TRUE(flushed_in_thread);
  EXPECT_EQ(halved_in_thread, 0.0f);
}

TEST_F(Denormals, KeptWhenTheVariableAsks) {
  setenv(kKeepDenormalsVariable, "1", 1);
  EXPECT_FALSE(flush_denormals_unless_kept());
  EXPECT_FALSE(profiler::denormals_flushed());
  EXPECT_EQ(halved_by_libtorch(), kSmallestNormal / 2);
}

TEST_F(Denormals, EmptyOrZeroDoesNotKeepThem) {
  for (const char* value : {"", "0"}) {
    at::globalContext().setFlushDenormal(false);
    setenv(kKeepDenormalsVariable, value, 1);
    EXPECT_TRUE(flush_denormals_unless_kept()) << "'" << value << "'";
  }
}

}  // namespace
}  // namespace pipebal::workflow
