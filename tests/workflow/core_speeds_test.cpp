// The blocks of cores ranked by the time each took for the same work: fastest first, speeds
// relative to it, medians over the rounds; and the speeds to plan with, round by round.
#include "pipebal/workflow/core_speeds.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace {

using pipebal::workflow::rank_cores;
using pipebal::workflow::speeds_round_by_round;

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
  // Each block's own times come along, round by round.
  EXPECT_EQ(ranked.times_ms[0], (std::vector<double>{35, 36, 34}));
  EXPECT_EQ(ranked.times_ms[2], (std::vector<double>{50, 90, 88}));
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

// A spell that slows the whole machine drops out round by round; a core slow in one spell of
// four costs the mean of its spells (a median would call it as fast as the first).
TEST(CoreSpeeds, RoundByRoundSpeedsAreTheMeanOfEachRoundsRatio) {
  const auto speeds = speeds_round_by_round({{60, 60, 120, 60}, {60, 80, 120, 60}});
  ASSERT_EQ(speeds.size(), 2u);
  EXPECT_DOUBLE_EQ(speeds[0], 1);
  // Ratios 1, 4/3, 1, 1: mean 13/12.
  EXPECT_DOUBLE_EQ(speeds[1], 12.0 / 13);
  // A device faster than the first gets a speed above 1.
  EXPECT_DOUBLE_EQ(speeds_round_by_round({{10, 20}, {5, 10}})[1], 2);
}

TEST(CoreSpeeds, RoundByRoundRefusesRoundsThatDoNotPair) {
  EXPECT_THROW(speeds_round_by_round({}), std::invalid_argument);
  EXPECT_THROW(speeds_round_by_round({{10, 11}, {10}}), std::invalid_argument);
  EXPECT_THROW(speeds_round_by_round({{10}, {-1}}), std::invalid_argument);
  EXPECT_THROW(speeds_round_by_round({{}}), std::invalid_argument);
}

}  // namespace
