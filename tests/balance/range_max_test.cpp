// RangeMax against a scan of every range of random sequences.
#include "pipebal/balance/range_max.h"

#include <algorithm>
#include <random>

#include <gtest/gtest.h>

namespace pipebal::balance {
namespace {

TEST(RangeMax, EqualsTheMaximumOfEveryRange) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int64_t> value(-1000, 1000);
  for (size_t n = 1; n <= 40; ++n) {
    std::vector<int64_t> values(n);
    for (int64_t& v : values) v = value(rng);
    const RangeMax ranges(values);
    for (size_t first = 0; first < n; ++first) {
      for (size_t end = first + 1; end <= n; ++end) {
        EXPECT_EQ(ranges.max(first, end),
                  *std::max_element(values.begin() + first, values.begin() + end))
            << n << " [" << first << ", " << end << ")";
      }
    }
  }
}

TEST(RangeMax, IsEmptyOnlyWhenMadeWithoutValues) {
  EXPECT_TRUE(RangeMax().empty());
  EXPECT_FALSE(RangeMax({7}).empty());
  EXPECT_EQ(RangeMax({7}).max(0, 1), 7);
}

}  // namespace
}  // namespace pipebal::balance
