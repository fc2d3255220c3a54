// Under `launch --bind-cores` each process has cores of its own but the host's processes share
// their control group's CPU quota: their threads are checked against it together.
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "tools/common_options.h"

namespace pipebal::tools {
namespace {

std::optional<CpuQuota> quota_of(double cores) {
  return CpuQuota{cores, "/sys/fs/cgroup/pod"};
}

TEST(SharedQuota, ThreadsOfAllProcessesPastTheQuotaAreOneWarningLine) {
  const std::string warning = shared_quota_warning(2, 2, quota_of(2.0));
  EXPECT_EQ(warning,
            "pipebal: warning: 2 processes x 2 intra-op threads need 4 cores, more than the 2 "
            "cores that the CPU quota of 2.00 cores they share lets them run on: they wait on "
            "the quota and run slower than their profile predicts (use fewer --threads)\n");
  // A part of a core keeps a thread going part of the time: 1.5 cores run 2 threads, not 4.
  EXPECT_NE(shared_quota_warning(2, 2, quota_of(1.5)).find("need 4 cores, more than the 2 cores"),
            std::string::npos);
  EXPECT_NE(shared_quota_warning(4, 2, quota_of(0.5)).find("more than the 1 core that"),
            std::string::npos);
}

TEST(SharedQuota, ThreadsWithinTheQuotaOrWithoutOneAreNotWarnedOf) {
  EXPECT_EQ(shared_quota_warning(2, 2, quota_of(4.0)), "");
  EXPECT_EQ(shared_quota_warning(2, 2, quota_of(3.5)), "");  // rounded up: 4 cores
  EXPECT_EQ(shared_quota_warning(8, 4, std::nullopt), "");
  // One thread per process only time-shares, as stages of one process do.
  EXPECT_EQ(shared_quota_warning(4, 1, quota_of(1.0)), "");
}

}  // namespace
}  // namespace pipebal::tools
