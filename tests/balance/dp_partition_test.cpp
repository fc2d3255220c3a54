// The exact partitioner against enumeration of every partition, and its memory errors.
#include "pipebal/balance/dp_partition.h"

#include <random>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "pipebal/balance/partition.h"
#include "test_support.h"

namespace pipebal::balance {
namespace {

using testing::brute_force;
using testing::random_layers;
using testing::random_options;

struct Outcome {
  double bottleneck_ms = 0;
  double sum_ms = 0;
};

Outcome evaluate(const CostModel& model, const std::vector<int>& balance) {
  Outcome outcome;
  int first = 0;
  for (int s = 0; s < model.stage_count(); ++s) {
    const double cost = model.cost_ms(s, first, first + balance[s]);
    EXPECT_GE(balance[s], 1);
    EXPECT_LE(model.memory_bytes(s, first, first + balance[s]), model.memory_cap_bytes(s));
    outcome.bottleneck_ms = std::max(outcome.bottleneck_ms, cost);
    outcome.sum_ms += cost;
    first += balance[s];
  }
  EXPECT_EQ(first, model.layer_count());
  return outcome;
}

// Runs `instances` random instances with the given features and compares dp with enumeration;
// models of up to `max_layers` layers on up to `max_stages` stages.
void compare_with_brute_force(uint32_t seed, int instances, bool caps, bool speeds, bool bandwidth,
                              int max_layers = 14, int max_stages = 6) {
  std::mt19937 rng(seed);
  int infeasible = 0;
  for (int t = 0; t < instances; ++t) {
    const int n = 1 + static_cast<int>(rng() % max_layers);
    const int k = 1 + static_cast<int>(rng() % std::min(max_stages, n));
    const auto layers = random_layers(rng, n, /*integer_costs=*/t % 2 == 0);
    CostOptions options = random_options(rng, k, speeds, bandwidth);
    if (caps) {
      // Caps around the smallest achievable peak: some instances become infeasible.
      const auto smallest = brute_force(CostModel(layers, k, options)).smallest_memory_bytes;
      std::uniform_real_distribution<double> factor(0.9, 1.6);
      if (rng() % 2) {
        options.memory_caps_bytes = {static_cast<int64_t>(smallest * factor(rng)) + 1};
      } else {
        // Some stages without a cap: dp skips their limit tables, the rest keep theirs.
        for (int s = 0; s < k; ++s) {
          options.memory_caps_bytes.push_back(
              rng() % 3 == 0 ? kUnlimitedBytes : static_cast<int64_t>(smallest * factor(rng)) + 1);
        }
      }
    }
    const CostModel model(layers, k, options);
    const testing::BruteForce expected = brute_force(model);
    SCOPED_TRACE("instance " + std::to_string(t) + ": n=" + std::to_string(n) +
                 " k=" + std::to_string(k));
    if (!expected.feasible) {
      ++infeasible;
      EXPECT_THROW(dp_partition(model), std::invalid_argument);
      continue;
    }
    const Outcome got = evaluate(model, dp_partition(model));
    ASSERT_EQ(got.bottleneck_ms, expected.bottleneck_ms);
    ASSERT_NEAR(got.sum_ms, expected.sum_ms, 1e-9 * (1 + expected.sum_ms));
  }
  if (caps) {
    EXPECT_GT(infeasible, 0) << "caps never bind; the test would prove little";
  }
}

TEST(DpPartition, MatchesBruteForceOnRandomInstances) {
  compare_with_brute_force(1, 2500, false, false, false);
}

TEST(DpPartition, MatchesBruteForceWithMemoryCaps) {
  compare_with_brute_force(2, 2500, true, false, false);
}

TEST(DpPartition, MatchesBruteForceWithSpeedsAndBandwidth) {
  compare_with_brute_force(3, 2500, false, true, true);
}

TEST(DpPartition, MatchesBruteForceWithEverything) {
  compare_with_brute_force(4, 2500, true, true, true);
}

// Longer models put the optimum within a few percent of the search's lower bound (the work
// spread evenly), where it gallops instead of bisecting.
TEST(DpPartition, MatchesBruteForceOnLongerModels) {
  compare_with_brute_force(5, 60, false, false, false, 36, 4);
  compare_with_brute_force(6, 60, true, true, true, 36, 4);
}

// The planner costs GPipe and 1F1B with one dp balance when no memory cap applies: they must
// charge every extent the same.
// zb-h1 whose W delays are still to be chosen: a stage fits its cap where it fits with W right
// after B or with its backward whole (the delays go down to that), whichever needs less.
TEST(DpPartition, MatchesBruteForceWhereAStageMayFitWithItsBackwardWhole) {
  std::mt19937 rng(7);
  int infeasible = 0;
  int only_whole = 0;  // fitting only because some stage keeps its backward whole
  for (int t = 0; t < 1500; ++t) {
    const int n = 1 + static_cast<int>(rng() % 12);
    const int k = 1 + static_cast<int>(rng() % std::min(5, n));
    const auto layers = random_layers(rng, n, /*integer_costs=*/t % 2 == 0);
    CostOptions split = random_options(rng, k, /*speeds=*/true, /*bandwidth=*/true);
    split.schedule = pipeline::ScheduleKind::kZeroBubbleH1;
    split.weight_delays.assign(k, 0);
    CostOptions whole = split;
    whole.weight_delays.assign(k, pipeline::kWholeBackward);
    const int64_t smallest = [&] {
      const CostModel lean(layers, k, split), alternative(layers, k, whole);
      return brute_force(lean, &alternative).smallest_memory_bytes;
    }();
    std::uniform_real_distribution<double> factor(0.9, 1.3);
    split.memory_caps_bytes =
        whole.memory_caps_bytes = {static_cast<int64_t>(double(smallest) * factor(rng)) + 1};
    const CostModel lean(layers, k, split), alternative(layers, k, whole);
    SCOPED_TRACE("instance " + std::to_string(t));
    EXPECT_EQ(smallest_feasible_memory_cap(lean, &alternative), smallest);
    const testing::BruteForce expected = brute_force(lean, &alternative);
    if (!expected.feasible) {
      ++infeasible;
      EXPECT_THROW(dp_partition(lean, &alternative), std::invalid_argument);
      continue;
    }
    only_whole += !brute_force(lean).feasible;
    const std::vector<int> balance = dp_partition(lean, &alternative);
    double bottleneck_ms = 0;
    for (int s = 0, first = 0; s < k; first += balance[s], ++s) {
      const int end = first + balance[s];
      bottleneck_ms = std::max(bottleneck_ms, lean.cost_ms(s, first, end));
      EXPECT_LE(std::min(lean.memory_bytes(s, first, end), alternative.memory_bytes(s, first, end)),
                lean.memory_cap_bytes(s));
    }
    ASSERT_EQ(bottleneck_ms, expected.bottleneck_ms);
    // Planned with its delays chosen, every stage keeps within its cap (a whole backward where
    // W right after B does not fit).
    CostOptions open = split;
    open.weight_delays.clear();
    const Plan plan = partition(CostModel(layers, k, open), Algorithm::kDp);
    EXPECT_EQ(plan.balance, balance);
    for (const StagePlan& stage : plan.stages) {
      EXPECT_LE(stage.memory_bytes, stage.memory_cap_bytes);
    }
  }
  EXPECT_GT(infeasible, 0) << "caps never bind";
  EXPECT_GT(only_whole, 0) << "no instance fits only with a whole backward: the test proves little";
}

TEST(DpPartition, GPipeAndOneFOneBShareTheirBalanceWithoutCaps) {
  std::mt19937 rng(8);
  for (int t = 0; t < 200; ++t) {
    const int n = 1 + static_cast<int>(rng() % 30);
    const int k = 1 + static_cast<int>(rng() % std::min(6, n));
    const auto layers = random_layers(rng, n, /*integer_costs=*/false);
    CostOptions options = random_options(rng, k, /*speeds=*/true, /*bandwidth=*/true);
    options.weight_delays.clear();
    options.schedule = pipeline::ScheduleKind::kGPipe;
    const CostModel gpipe(layers, k, options);
    options.schedule = pipeline::ScheduleKind::kOneFOneB;
    const CostModel one_f_one_b(layers, k, options);
    for (int s = 0; s < k; ++s) {
      for (int a = 0; a < n; ++a) {
        for (int j = a + 1; j <= n; ++j) {
          ASSERT_EQ(gpipe.cost_ms(s, a, j), one_f_one_b.cost_ms(s, a, j)) << t;
        }
      }
    }
    EXPECT_EQ(dp_partition(gpipe), dp_partition(one_f_one_b)) << t;
  }
}

TEST(DpPartition, PrefersTheSmallerSumOfStageCostsAmongEqualBottlenecks) {
  // Layer 0 (10 ms) alone on stage 0 is the bottleneck of every optimal partition; the other
  // three 1 ms layers go [1,2] or [2,1] onto stages of speed 1 and 2, summing 1 + 1 or 2 + 0.5:
  // the tie-break puts more work on the fast device.
  std::vector<LayerCost> layers(4);
  layers[0].forward_ms = 10;
  for (int i = 1; i < 4; ++i) layers[i].forward_ms = 1;
  CostOptions options;
  options.checkpoint = pipeline::CheckpointMode::kNever;
  options.device_speeds = {1.0, 1.0, 2.0};
  EXPECT_EQ(dp_partition(CostModel(layers, 3, options)), (std::vector<int>{1, 1, 2}));

  // Same shape on equal devices, but cutting after layer 1 costs a 0.5 ms transfer and after
  // layer 2 nothing: [1,1,2] sums 10 + 1.5 + 2, [1,2,1] sums 10 + 2 + 1.
  layers[1].output_bytes = 50;
  CostOptions with_link;
  with_link.checkpoint = pipeline::CheckpointMode::kNever;
  with_link.bandwidth_bytes_per_ms = 100;
  EXPECT_EQ(dp_partition(CostModel(layers, 3, with_link)), (std::vector<int>{1, 2, 1}));
}

TEST(DpPartition, NeverWorseThanTheOtherPartitioners) {
  std::mt19937 rng(5);
  for (int t = 0; t < 300; ++t) {
    const int n = 2 + static_cast<int>(rng() % 60);
    const int k = 1 + static_cast<int>(rng() % std::min(8, n));
    const CostModel model(random_layers(rng, n, t % 2 == 0), k,
                          random_options(rng, k, t % 3 == 0, t % 4 == 0));
    const double dp = partition(model, Algorithm::kDp).bottleneck_ms;
    for (Algorithm other : all_algorithms()) {
      EXPECT_LE(dp, partition(model, other).bottleneck_ms) << to_string(other);
    }
  }
}

TEST(DpPartition, ScalesToTenThousandLayersAndSixtyFourStages) {
  std::mt19937 rng(6);
  const CostModel model(random_layers(rng, 10000, false), 64, CostOptions{});
  const std::vector<int> balance = dp_partition(model);
  ASSERT_EQ(balance.size(), 64u);
  // A lower bound: the total work spread perfectly evenly.
  const double total_ms = model.time_ms(0, 0, model.layer_count());
  double worst_ms = 0;
  for (int s = 0, first = 0; s < 64; first += balance[s], ++s) {
    worst_ms = std::max(worst_ms, model.cost_ms(s, first, first + balance[s]));
  }
  EXPECT_GE(worst_ms, total_ms / 64);
  EXPECT_LE(worst_ms, total_ms / 64 + 40.0);  // within two of the largest layers
}

TEST(DpPartition, InfeasibleCapsNameTheSmallestCapThatWorks) {
  std::vector<LayerCost> layers(4);
  for (auto& l : layers) {
    l.forward_ms = 1;
    l.param_bytes = 100;  // 200 bytes each with param_scale 2
  }
  CostOptions options;
  options.checkpoint = pipeline::CheckpointMode::kNever;
  options.memory_caps_bytes = {300};
  const CostModel model(layers, 2, options);
  EXPECT_EQ(smallest_feasible_memory_cap(model), 400);
  try {
    dp_partition(model);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("fits the memory caps"), std::string::npos) << message;
    EXPECT_NE(message.find("smallest cap that would work on every stage is 400 B"),
              std::string::npos)
        << message;
  }
}

// Where every partition has a stage past the bytes pipebal counts (its memory saturates there),
// no cap fits, and the error says so rather than name a cap of 0 B.
TEST(DpPartition, CapsNoneCanMeetSayThatNoCapWould) {
  std::vector<LayerCost> layers(6);
  for (auto& l : layers) {
    l.forward_ms = 1;
    l.param_bytes = kMaxLayerBytes;  // 4.4e18 bytes each at param_scale 1e6
  }
  CostOptions options;
  options.param_scale = 1e6;
  options.memory_caps_bytes = {int64_t{8} << 30};
  const CostModel model(layers, 2, options);
  EXPECT_EQ(smallest_feasible_memory_cap(model), kUnlimitedBytes);
  try {
    dp_partition(model);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& error) {
    EXPECT_EQ(std::string(error.what()),
              "no partition of 6 layers into 2 stages fits the memory caps (8.00 GiB on every "
              "stage); no cap would: every partition has a stage that needs more than 8.00 EiB, "
              "the most pipebal counts (are the profile's bytes and --param-scale right?)");
  }
}

TEST(DpPartition, SmallestFeasibleCapMatchesBruteForce) {
  std::mt19937 rng(7);
  for (int t = 0; t < 500; ++t) {
    const int n = 1 + static_cast<int>(rng() % 12);
    const int k = 1 + static_cast<int>(rng() % std::min(5, n));
    const CostModel model(random_layers(rng, n, false), k, random_options(rng, k, false, false));
    EXPECT_EQ(smallest_feasible_memory_cap(model), brute_force(model).smallest_memory_bytes);
  }
}

}  // namespace
}  // namespace pipebal::balance
