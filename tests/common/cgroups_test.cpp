// The memory limit of this process's control groups, read as the kernel shows it: cgroup v2's
// memory.max or v1's memory.limit_in_bytes, the tightest from its cgroup up to the part of the
// hierarchy mounted. Each case lays the files out under a scratch directory as a machine has
// them. (The walk itself, shared with the CPU quota, is tested in cores_test.cpp.)
#include "pipebal/common/cgroups.h"

#include <gtest/gtest.h>

#include "tests/support/scratch_dir.h"

namespace {

using pipebal::testing::write_under;

TEST(CgroupMemoryLimit, AContainersMemoryMaxInBytes) {
  // docker run --memory 4g on cgroup v2, in a cgroup namespace.
  const std::string root = pipebal::testing::scratch_dir();
  write_under(root, "/proc/self/mountinfo",
              "30 22 0:27 / /sys/fs/cgroup rw shared:4 - cgroup2 cgroup2 rw\n");
  write_under(root, "/proc/self/cgroup", "0::/\n");
  write_under(root, "/sys/fs/cgroup/memory.max", "4294967296\n");
  EXPECT_EQ(pipebal::cgroup_memory_limit(root), 4294967296.0);
  write_under(root, "/sys/fs/cgroup/memory.max", "max\n");
  EXPECT_FALSE(pipebal::cgroup_memory_limit(root).has_value());
}

TEST(CgroupMemoryLimit, TheTightestUpTheHierarchyAndV1sNoLimit) {
  // cgroup v1's memory controller; a job's cgroup below a slice that limits it.
  const std::string root = pipebal::testing::scratch_dir();
  write_under(root, "/proc/self/mountinfo",
              "34 30 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
              "31 30 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n");
  write_under(root, "/proc/self/cgroup", "5:memory:/jobs/train\n4:cpu:/jobs/train\n");
  write_under(root, "/sys/fs/cgroup/memory/jobs/train/memory.limit_in_bytes",
              "9223372036854771712\n");
  EXPECT_FALSE(pipebal::cgroup_memory_limit(root).has_value()) << "v1's way of saying none";
  write_under(root, "/sys/fs/cgroup/memory/jobs/memory.limit_in_bytes", "1073741824\n");
  EXPECT_EQ(pipebal::cgroup_memory_limit(root), 1073741824.0) << "the slice's binds the job";
  write_under(root, "/sys/fs/cgroup/memory/jobs/train/memory.limit_in_bytes", "536870912\n");
  EXPECT_EQ(pipebal::cgroup_memory_limit(root), 536870912.0);
  write_under(root, "/sys/fs/cgroup/cpu/jobs/train/memory.limit_in_bytes", "1024\n");
  EXPECT_EQ(pipebal::cgroup_memory_limit(root), 536870912.0) << "not the cpu hierarchy's";
}

TEST(CgroupMemoryLimit, TheDirectoriesFromItsOwnCgroupUpToTheMountedPart) {
  const std::string root = pipebal::testing::scratch_dir();
  write_under(root, "/proc/self/mountinfo",
              "34 30 0:31 /docker/ab12 /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n");
  write_under(root, "/proc/self/cgroup", "5:memory:/docker/ab12/a/b\n");
  const std::vector<pipebal::CgroupDir> dirs = pipebal::cgroup_dirs("memory", root);
  ASSERT_EQ(dirs.size(), 3u);
  EXPECT_EQ(dirs[0].path, root + "/sys/fs/cgroup/memory/a/b");
  EXPECT_EQ(dirs[1].path, root + "/sys/fs/cgroup/memory/a");
  EXPECT_EQ(dirs[2].path, root + "/sys/fs/cgroup/memory");
  EXPECT_FALSE(dirs[0].v2);
  EXPECT_TRUE(pipebal::cgroup_dirs("cpu", root).empty()) << "no hierarchy with that controller";
}

}  // namespace
