// launch --bind-cores's split of the launcher's cores: whole physical cores (each with its
// hardware threads) in contiguous runs, every core given, the first processes one core longer
// when they do not divide evenly; hardware threads apart only when there are fewer cores than
// processes.
#include <stdexcept>

#include <gtest/gtest.h>

#include "pipebal/distributed/launcher.h"

namespace {

using pipebal::distributed::core_shares;
using Shares = std::vector<std::vector<int>>;

// Each CPU a core of its own (no hardware threads, or none known).
Shares alone(const std::vector<int>& cpus) {
  Shares cores;
  for (const int cpu : cpus) cores.push_back({cpu});
  return cores;
}

TEST(CoreShares, TheLaunchersCoresInContiguousRuns) {
  EXPECT_EQ(core_shares(alone({0, 1}), 2), (Shares{{0}, {1}}));
  EXPECT_EQ(core_shares(alone({0, 1, 2, 3, 4, 5, 6, 7}), 2), (Shares{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(core_shares(alone({0, 1, 2, 3, 4}), 3), (Shares{{0, 1}, {2, 3}, {4}}));
  // A launcher pinned to some cores (taskset -c 2,3,6,7) shares out those.
  EXPECT_EQ(core_shares(alone({2, 3, 6, 7}), 2), (Shares{{2, 3}, {6, 7}}));
  EXPECT_EQ(core_shares(alone({5}), 1), (Shares{{5}}));
  EXPECT_THROW(core_shares(alone({0, 1}), 3), std::invalid_argument) << "a process without a core";
  EXPECT_THROW(core_shares(alone({0, 1}), 0), std::invalid_argument);
}

TEST(CoreShares, HardwareThreadsOfOneCoreGoToOneProcess) {
  // 4 cores, their second threads numbered after the first ones (0-3 / 4-7).
  const Shares cores{{0, 4}, {1, 5}, {2, 6}, {3, 7}};
  EXPECT_EQ(core_shares(cores, 2), (Shares{{0, 1, 4, 5}, {2, 3, 6, 7}}))
      << "not 0-3 and 4-7: each process would hold one thread of every core";
  EXPECT_EQ(core_shares(cores, 4), (Shares{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(core_shares(cores, 3), (Shares{{0, 1, 4, 5}, {2, 6}, {3, 7}}));
  // More processes than cores: threads apart, a core's siblings side by side.
  EXPECT_EQ(core_shares(Shares{{0, 2}, {1, 3}}, 3), (Shares{{0, 2}, {1}, {3}}));
  EXPECT_EQ(core_shares(Shares{{0, 2}, {1, 3}}, 4), (Shares{{0}, {2}, {1}, {3}}));
  EXPECT_THROW(core_shares(Shares{{0, 2}, {1, 3}}, 5), std::invalid_argument);
}

}  // namespace
