// The statistics helpers on hand-computed values, edge cases first.
#include "pipebal/profiler/statistics.h"

#include <cmath>
#include <stdexcept>

#include <gtest/gtest.h>

namespace pipebal::profiler {
namespace {

TEST(Statistics, EmptySampleIsAnError) {
  const std::vector<double> none;
  EXPECT_THROW(median(none), std::invalid_argument);
  EXPECT_THROW(percentile(none, 50), std::invalid_argument);
  EXPECT_THROW(mean(none), std::invalid_argument);
  EXPECT_THROW(stddev(none), std::invalid_argument);
  EXPECT_THROW(coefficient_of_variation(none), std::invalid_argument);
}

TEST(Statistics, OneSampleIsItsOwnSummary) {
  const std::vector<double> one{3.5};
  EXPECT_DOUBLE_EQ(median(one), 3.5);
  EXPECT_DOUBLE_EQ(percentile(one, 10), 3.5);
  EXPECT_DOUBLE_EQ(percentile(one, 90), 3.5);
  EXPECT_DOUBLE_EQ(mean(one), 3.5);
  EXPECT_DOUBLE_EQ(stddev(one), 0.0);
  EXPECT_DOUBLE_EQ(coefficient_of_variation(one), 0.0);
}

TEST(Statistics, TwoSamplesInterpolate) {
  const std::vector<double> two{4.0, 2.0};  // order must not matter
  EXPECT_DOUBLE_EQ(median(two), 3.0);
  EXPECT_DOUBLE_EQ(percentile(two, 0), 2.0);
  EXPECT_DOUBLE_EQ(percentile(two, 10), 2.2);
  EXPECT_DOUBLE_EQ(percentile(two, 90), 3.8);
  EXPECT_DOUBLE_EQ(percentile(two, 100), 4.0);
  EXPECT_DOUBLE_EQ(stddev(two), std::sqrt(2.0));
}

TEST(Statistics, HandValuesMatchNumpy) {
  // numpy.percentile([1, 2, 3, 4, 10], [10, 50, 90]) == [1.4, 3.0, 7.6]
  const std::vector<double> s{10, 3, 1, 4, 2};
  EXPECT_DOUBLE_EQ(median(s), 3.0);
  EXPECT_NEAR(percentile(s, 10), 1.4, 1e-12);
  EXPECT_NEAR(percentile(s, 90), 7.6, 1e-12);
  EXPECT_DOUBLE_EQ(mean(s), 4.0);
  // Sample variance: (36 + 1 + 9 + 0 + 4) / 4 = 12.5.
  EXPECT_DOUBLE_EQ(stddev(s), std::sqrt(12.5));
  EXPECT_DOUBLE_EQ(coefficient_of_variation(s), std::sqrt(12.5) / 4.0);
  // Even count: the mean of the middle two.
  EXPECT_DOUBLE_EQ(median({1, 2, 3, 4}), 2.5);
}

TEST(Statistics, ZeroMeanHasZeroVariation) {
  EXPECT_DOUBLE_EQ(coefficient_of_variation({0, 0, 0}), 0.0);
}

TEST(Statistics, PercentileOutsideRangeIsAnError) {
  try {
    percentile({1, 2}, 101);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("[0, 100]"), std::string::npos) << error.what();
  }
  EXPECT_THROW(percentile({1, 2}, -1), std::invalid_argument);
  EXPECT_THROW(percentile({1, 2}, std::nan("")), std::invalid_argument);
}

}  // namespace
}  // namespace pipebal::profiler
