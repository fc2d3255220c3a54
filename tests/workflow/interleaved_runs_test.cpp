// workflow::turn_order balances the order of the runs over the rounds; run_interleaved steps
// every run and calls back after each round of measured steps with the runs alive.
#include "pipebal/workflow/interleaved_runs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

namespace pipebal::workflow {
namespace {

// Every round steps every run once; over a period (n rounds, 2n when n is odd) each run goes
// first equally often and each run directly follows each other run equally often.
TEST(TurnOrder, EachRunGoesFirstAndFollowsEveryOtherEquallyOften) {
  EXPECT_EQ(turn_order(0, 4), (std::vector<size_t>{0, 1, 3, 2}));
  EXPECT_EQ(turn_order(1, 4), (std::vector<size_t>{1, 2, 0, 3}));
  EXPECT_EQ(turn_order(4, 4), turn_order(0, 4));
  EXPECT_EQ(turn_order(7, 1), (std::vector<size_t>{0}));
  EXPECT_TRUE(turn_order(4, 0).empty());
  for (size_t n = 2; n <= 7; ++n) {
    const int period = static_cast<int>(n % 2 == 0 ? n : 2 * n);
    std::map<size_t, int> first;
    std::map<std::pair<size_t, size_t>, int> follows;
    for (int round = 0; round < period; ++round) {
      std::vector<size_t> order = turn_order(round, n);
      ++first[order.front()];
      for (size_t i = 1; i < n; ++i) ++follows[{order[i - 1], order[i]}];
      std::sort(order.begin(), order.end());
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(order[i], i) << "round " << round << " of " << n;
    }
    ASSERT_EQ(first.size(), n);
    for (const auto& [run, count] : first) EXPECT_EQ(count, period / static_cast<int>(n)) << n;
    ASSERT_EQ(follows.size(), n * (n - 1)) << n;
    const int each = period * static_cast<int>(n - 1) / static_cast<int>(n * (n - 1));
    for (const auto& [pair, count] : follows) EXPECT_EQ(count, each) << n;
  }
}

TEST(RunInterleaved, CallsBackAfterEachRoundOfMeasuredStepsOnly) {
  TrainSettings three;
  three.model = "mlp:layers=3,width=16";
  three.input_shape = {16, 16};
  three.balance = {2, 2};
  three.chunks = 2;
  three.steps = 3;
  three.warmup_steps = 1;
  TrainSettings five = three;
  five.steps = 5;
  five.warmup_steps = 2;
  std::vector<int> rounds;
  const std::vector<reports::RunRecord> runs =
      run_interleaved({three, five}, [&](int round, const std::vector<TrainingRun*>& alive) {
        rounds.push_back(round);
        ASSERT_EQ(alive.size(), 2u);
        // In the order of their settings, between their steps: the first done after its three
        // measured rounds, the second after its five.
        EXPECT_EQ(alive[0]->total_steps(), 1 + 3);
        EXPECT_EQ(alive[1]->total_steps(), 2 + 5);
        EXPECT_EQ(alive[0]->done(), round >= 2);
        EXPECT_EQ(alive[1]->done(), round >= 4);
      });
  // One call per round while any run still steps, none during the warm-up.
  EXPECT_EQ(rounds, (std::vector<int>{0, 1, 2, 3, 4}));
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].steps.size(), 3u);
  EXPECT_EQ(runs[1].steps.size(), 5u);
}

}  // namespace
}  // namespace pipebal::workflow
