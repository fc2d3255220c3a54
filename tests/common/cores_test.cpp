// The physical cores of a set of CPUs, from sysfs's thread siblings; and a control group's CPU
// quota, read as the kernel shows it: /proc/self/cgroup and /proc/self/mountinfo say where this
// process's cgroup is, cgroup v2's cpu.max or v1's cpu.cfs_quota_us and cpu.cfs_period_us what it
// may use. Each case lays those files out under a scratch directory as a machine has them.
#include "pipebal/common/cores.h"

#include <gtest/gtest.h>

#include "tests/support/scratch_dir.h"

namespace {

using pipebal::testing::write_under;

// The quota's cores, or -1 for none.
double cores(const std::string& root) {
  const std::optional<pipebal::CpuQuota> quota = pipebal::cpu_quota(root);
  return quota ? quota->cores : -1;
}

const char* kV2Mount = "30 22 0:27 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";

TEST(CpuQuota, AContainersCpuMaxInCores) {
  // docker run --cpus 1.5 with a cgroup namespace: its cgroup is "/", the hierarchy's mounted part.
  const std::string root = pipebal::testing::scratch_dir();
  write_under(root, "/proc/self/mountinfo",
              "21 1 8:1 / / rw - ext4 /dev/sda1 rw\n" + std::string(kV2Mount));
  write_under(root, "/proc/self/cgroup", "0::/\n");
  write_under(root, "/sys/fs/cgroup/cpu.max", "150000 100000\n");
  const std::optional<pipebal::CpuQuota> quota = pipebal::cpu_quota(root);
  ASSERT_TRUE(quota.has_value());
  EXPECT_DOUBLE_EQ(quota->cores, 1.5);
  EXPECT_EQ(quota->cgroup_dir, root + "/sys/fs/cgroup");

  write_under(root, "/sys/fs/cgroup/cpu.max", "max 100000\n");
  EXPECT_FALSE(pipebal::cpu_quota(root).has_value()) << "no quota";
}

TEST(CpuQuota, TheTightestFromTheCgroupUpToTheRoot) {
  // A host's systemd: the quota of a slice binds the services below it.
  const std::string root = pipebal::testing::scratch_dir();
  write_under(root, "/proc/self/mountinfo", kV2Mount);
  write_under(root, "/proc/self/cgroup", "0::/jobs.slice/train.service\n");
  write_under(root, "/sys/fs/cgroup/jobs.slice/train.service/cpu.max", "max 100000\n");
  write_under(root, "/sys/fs/cgroup/jobs.slice/cpu.max", "300000 100000\n");
  EXPECT_EQ(cores(root), 3.0);
  EXPECT_EQ(pipebal::cpu_quota(root)->cgroup_dir, root + "/sys/fs/cgroup/jobs.slice");
  write_under(root, "/sys/fs/cgroup/jobs.slice/train.service/cpu.max", "50000 50000\n");
  EXPECT_EQ(cores(root), 1.0) << "the service's own, tighter";
  EXPECT_EQ(pipebal::cpu_quota(root)->cgroup_dir, root + "/sys/fs/cgroup/jobs.slice/train.service");
}

TEST(CpuQuota, CgroupV1sCpuControllerInAContainerWithoutANamespace) {
  // Docker on cgroup v1: the container's cgroup "/docker/ID" is the part mounted.
  const std::string root = pipebal::testing::scratch_dir();
  write_under(root, "/proc/self/mountinfo",
              "31 30 0:28 /docker/ab12 /sys/fs/cgroup/cpu,cpuacct ro,nosuid - cgroup cgroup "
              "rw,cpu,cpuacct\n"
              "33 30 0:30 /docker/ab12 /sys/fs/cgroup/cpuset ro - cgroup cgroup rw,cpuset\n");
  write_under(root, "/proc/self/cgroup",
              "5:cpuset:/docker/ab12\n4:cpu,cpuacct:/docker/ab12\n1:name=systemd:/docker/ab12\n");
  write_under(root, "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "200000\n");
  write_under(root, "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(cores(root), 2.0);

  write_under(root, "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  EXPECT_FALSE(pipebal::cpu_quota(root).has_value()) << "-1: no quota";
}

TEST(CpuQuota, ACgroupBelowTheMountedPartIsReadUpToIt) {
  // Docker on cgroup v1, its processes in a cgroup of their own below the container's; the
  // mountinfo lines with optional fields ("shared:5") before the separator, as most have.
  const std::string root = pipebal::testing::scratch_dir();
  write_under(
      root, "/proc/self/mountinfo",
      "31 30 0:28 /docker/ab12 /sys/fs/cgroup/cpu rw shared:5 master:1 - cgroup cgroup rw,cpu\n");
  write_under(root, "/proc/self/cgroup", "4:cpu:/docker/ab12/train\n");
  write_under(root, "/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "400000\n");
  write_under(root, "/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(cores(root), 4.0) << "the container's, above its own";
  write_under(root, "/sys/fs/cgroup/cpu/train/cpu.cfs_quota_us", "50000\n");
  write_under(root, "/sys/fs/cgroup/cpu/train/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(cores(root), 0.5);
  EXPECT_EQ(pipebal::cpu_quota(root)->cgroup_dir, root + "/sys/fs/cgroup/cpu/train");

  // A cgroup outside the part mounted ("/docker/ab" is not below "/docker/ab12"): the quota at
  // the mount point is another's.
  write_under(root, "/proc/self/cgroup", "4:cpu:/docker/ab\n");
  EXPECT_FALSE(pipebal::cpu_quota(root).has_value());
}

TEST(CpuQuota, EitherHierarchyOfAHybridSystem) {
  // systemd's hybrid layout: v1 controllers, and v2's hierarchy without them at .../unified.
  const std::string root = pipebal::testing::scratch_dir();
  write_under(root, "/proc/self/mountinfo",
              "30 22 0:27 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
              "31 22 0:28 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n");
  write_under(root, "/proc/self/cgroup", "4:cpu,cpuacct:/batch\n0::/batch\n");
  write_under(root, "/sys/fs/cgroup/unified/batch/cgroup.procs", "");
  write_under(root, "/sys/fs/cgroup/cpu,cpuacct/batch/cpu.cfs_quota_us", "150000\n");
  write_under(root, "/sys/fs/cgroup/cpu,cpuacct/batch/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(cores(root), 1.5);
}

TEST(CpuQuota, PathsWithEscapedSpacesAndMissingFilesAreNoQuota) {
  const std::string root = pipebal::testing::scratch_dir();
  write_under(root, "/proc/self/mountinfo",
              "30 22 0:27 / /sys/fs/my\\040cgroup rw - cgroup2 none rw\n");
  write_under(root, "/proc/self/cgroup", "0::/a\n");
  EXPECT_FALSE(pipebal::cpu_quota(root).has_value()) << "no cpu.max: the controller is off";
  write_under(root, "/sys/fs/my cgroup/a/cpu.max", "400000 100000\n");
  EXPECT_EQ(cores(root), 4.0);
  EXPECT_FALSE(pipebal::cpu_quota(root + "/nowhere").has_value());
}

TEST(CpuQuota, CoresAreTheQuotaRoundedUpWithinTheCpus) {
  EXPECT_EQ(pipebal::cores_within_quota(64, 2.0), 2);
  EXPECT_EQ(pipebal::cores_within_quota(64, 1.5), 2);
  EXPECT_EQ(pipebal::cores_within_quota(64, 0.2), 1);
  EXPECT_EQ(pipebal::cores_within_quota(4, 16.0), 4);
  EXPECT_EQ(pipebal::cores_within_quota(8, std::nullopt), 8);
  EXPECT_EQ(pipebal::cores_within_quota(0, std::nullopt), 1);
  EXPECT_EQ(pipebal::cores_within_quota(8, 1e12), 8) << "past what an int holds";
}

TEST(PhysicalCores, HardwareThreadsGroupedByTheirSiblingsList) {
  // sysfs of 2 cores of 2 threads each, numbered 0-1 / 2-3, and a CPU 7 without topology.
  const std::string root = pipebal::testing::scratch_dir();
  for (const auto& [cpu, siblings] :
       std::vector<std::pair<int, std::string>>{{0, "0,2"}, {1, "1,3"}, {2, "0,2"}, {3, "1,3"}}) {
    write_under(
        root,
        "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list",
        siblings + "\n");
  }
  using Cores = std::vector<std::vector<int>>;
  EXPECT_EQ(pipebal::physical_cores({0, 1, 2, 3}, root), (Cores{{0, 2}, {1, 3}}));
  EXPECT_EQ(pipebal::physical_cores({1, 2, 3, 7}, root), (Cores{{1, 3}, {2}, {7}}))
      << "in the order of each core's first CPU; the affinity's CPUs only";
  EXPECT_EQ(pipebal::physical_cores({}, root), Cores{});
}

}  // namespace
