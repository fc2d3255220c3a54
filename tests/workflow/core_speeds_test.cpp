// The blocks of cores ranked by the time each took for the same work: fastest first, speeds
// relative to it, medians over the rounds.
#include "pipebal/workflow/core_speeds.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace {

using pipebal::workflow::rank_cores;

TEST(CoreSpeeds, FastestFirstWithSpeedsRelativeToIt) {
  // CPU 1 slow in two rounds of three: its median says slow, one fast round does not.
  const auto ranked = rank_cores({{0}, {1}, {2, 3}}, {{70, 72, 71}, {50, 90, 88}, {35, 36, 34}});
  ASSERT_EQ(ranked.cpus.size(), 3u);
  EXPECT_EQ(ranked.cpus[0], (std::vector<int>{2, 3}));
  EXPECT_EQ(ranked.cpus[1], std::vector<int>{0});
  EXPECT_EQ(ranked.cpus[2], std::vector<int>{1});
  EXPECT_DOUBLE_EQ(ranked.ms[0], 35);
  EXPECT_DOUBLE_EQ(ranked.ms[1], 71);
  EXPECT_DOUBLE_EQ(ranked.ms[2], 88);
  EXPECT_DOUBLE_EQ(ranked.speeds[0], 1);
  EXPECT_DOUBLE_EQ(ranked.speeds[1], 35.0 / 71);
  EXPECT_DOUBLE_EQ(ranked.speeds[2], 35.0 / 88);
}

TEST(CoreSpeeds, EqualTimesKeepTheGivenOrder) {
  const auto ranked = rank_cores({{3}, {1}}, {{10, 12}, {11}});
  EXPECT_EQ(ranked.cpus[0], std::vector<int>{3});
  EXPECT_EQ(ranked.cpus[1], std::vector<int>{1});
  EXPECT_DOUBLE_EQ(ranked.speeds[1], 1);
}

TEST(CoreSpeeds, RefusesMissingOrNonPositiveTimes) {
  EXPECT_THROW(rank_cores({{0}, {1}}, {{10}}), std::invalid_argument);
  EXPECT_THROW(rank_cores({{0}}, {{}}), std::invalid_argument);
  EXPECT_THROW(rank_cores({{0}}, {{0}}), std::invalid_argument);
  EXPECT_THROW(rank_cores({}, {}), std::invalid_argument);
}

}  // namespace
