// The baseline partitioners: torchgpipe's block partition, uniform, balanced parameters.
#include "pipebal/balance/heuristic_partition.h"

#include <algorithm>
#include <random>
#include <stdexcept>

#include <gtest/gtest.h>

#include "test_support.h"

namespace pipebal::balance {
namespace {

int total(const std::vector<int>& balance) {
  int sum = 0;
  for (int layers : balance) sum += layers;
  return sum;
}

TEST(BlockPartition, MatchesTorchgpipeOnItsOwnExamples) {
  // Normalised [0, .2, .4, .6, .8, 1]: [3,3] sizes 0.6 / 2.4, then one move to [4,2] (1.2 / 1.8),
  // which is within 1: torchgpipe's test expects [[1,2,3,4],[5,6]].
  EXPECT_EQ(block_partition({1, 2, 3, 4, 5, 6}, 2), (std::vector<int>{4, 2}));
  EXPECT_EQ(block_partition({0, 0}, 2), (std::vector<int>{1, 1}));
  EXPECT_EQ(block_partition({5}, 1), (std::vector<int>{1}));
}

TEST(BlockPartition, NeverReturnsAnEmptyStage) {
  std::mt19937 rng(21);
  std::exponential_distribution<double> cost(1.0);
  for (int t = 0; t < 2000; ++t) {
    const int n = 1 + static_cast<int>(rng() % 40);
    const int k = 1 + static_cast<int>(rng() % n);
    std::vector<double> costs(n);
    for (double& c : costs) c = rng() % 5 == 0 ? 0.0 : cost(rng);
    const std::vector<int> balance = block_partition(costs, k);
    ASSERT_EQ(static_cast<int>(balance.size()), k);
    EXPECT_EQ(total(balance), n);
    EXPECT_GE(*std::min_element(balance.begin(), balance.end()), 1);
  }
}

TEST(UniformPartition, GivesTheRemainderToTheFirstStages) {
  EXPECT_EQ(uniform_partition(8, 3), (std::vector<int>{3, 3, 2}));
  EXPECT_EQ(uniform_partition(4, 4), (std::vector<int>{1, 1, 1, 1}));
}

TEST(MinMaxPartition, MatchesBruteForceMinimumOfTheLargestStage) {
  std::mt19937 rng(22);
  for (int t = 0; t < 2000; ++t) {
    const int n = 1 + static_cast<int>(rng() % 12);
    const int k = 1 + static_cast<int>(rng() % n);
    std::vector<int64_t> weights(n);
    for (auto& w : weights) w = rng() % 3 == 0 ? 0 : static_cast<int64_t>(rng() % 100);
    int64_t best = INT64_MAX;
    testing::for_each_partition(n, k, [&](const std::vector<int>& b) {
      int64_t worst = 0;
      for (int s = 0, first = 0; s < k; first += b[s], ++s) {
        int64_t sum = 0;
        for (int i = first; i < first + b[s]; ++i) sum += weights[i];
        worst = std::max(worst, sum);
      }
      best = std::min(best, worst);
    });
    const std::vector<int> balance = min_max_partition(weights, k);
    ASSERT_EQ(static_cast<int>(balance.size()), k);
    EXPECT_EQ(total(balance), n);
    int64_t worst = 0;
    for (int s = 0, first = 0; s < k; first += balance[s], ++s) {
      EXPECT_GE(balance[s], 1);
      int64_t sum = 0;
      for (int i = first; i < first + balance[s]; ++i) sum += weights[i];
      worst = std::max(worst, sum);
    }
    EXPECT_EQ(worst, best);
  }
}

TEST(HeuristicPartitions, RejectMoreStagesThanLayers) {
  EXPECT_THROW(block_partition({1, 2}, 3), std::invalid_argument);
  EXPECT_THROW(uniform_partition(2, 3), std::invalid_argument);
  EXPECT_THROW(min_max_partition({1}, 0), std::invalid_argument);
}

}  // namespace
}  // namespace pipebal::balance
