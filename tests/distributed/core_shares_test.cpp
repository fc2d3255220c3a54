// launch --bind-cores's split of the launcher's cores: contiguous runs in order, every core
// given, the first processes one core longer when they do not divide evenly.
#include <stdexcept>

#include <gtest/gtest.h>

#include "pipebal/distributed/launcher.h"

namespace {

using pipebal::distributed::core_shares;
using Shares = std::vector<std::vector<int>>;

TEST(CoreShares, TheLaunchersCoresInContiguousRuns) {
  EXPECT_EQ(core_shares({0, 1}, 2), (Shares{{0}, {1}}));
  EXPECT_EQ(core_shares({0, 1, 2, 3, 4, 5, 6, 7}, 2), (Shares{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(core_shares({0, 1, 2, 3, 4}, 3), (Shares{{0, 1}, {2, 3}, {4}}));
  // A launcher pinned to some cores (taskset -c 2,3,6,7) shares out those.
  EXPECT_EQ(core_shares({2, 3, 6, 7}, 2), (Shares{{2, 3}, {6, 7}}));
  EXPECT_EQ(core_shares({5}, 1), (Shares{{5}}));
  EXPECT_THROW(core_shares({0, 1}, 3), std::invalid_argument) << "a process without a core";
  EXPECT_THROW(core_shares({0, 1}, 0), std::invalid_argument);
}

}  // namespace
