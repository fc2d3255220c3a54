// zb-h1's W delays under a memory budget, against a reference that prices every delay of every
// stage, and the plans that carry them.
#include "pipebal/balance/weight_delays.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "pipebal/balance/partition.h"
#include "pipebal/balance/plan.h"
#include "test_support.h"

namespace pipebal::balance {
namespace {

using pipeline::ScheduleKind;

// Stage `stage`'s peak with W delay `delay` (the other stages' delays do not change it).
int64_t peak_at_delay(const CostModel& model, int stage, int delay, int first, int end) {
  CostOptions options = model.options();
  options.schedule = ScheduleKind::kZeroBubbleH1;
  options.weight_delays.assign(model.stage_count(), 0);
  options.weight_delays[stage] = delay;
  return CostModel(model.layers(), model.stage_count(), options).memory_bytes(stage, first, end);
}

// zb-h1 whose delays are to be chosen, with random checkpointing and micro-batches.
CostOptions random_zero_bubble_options(std::mt19937& rng, int k) {
  CostOptions options = testing::random_options(rng, k, false, false);
  options.schedule = ScheduleKind::kZeroBubbleH1;
  options.weight_delays.clear();
  return options;
}

TEST(WeightDelays, EachStageGetsTheLongestDelayWithinItsBudget) {
  std::mt19937 rng(21);
  for (int t = 0; t < 300; ++t) {
    const int n = 1 + static_cast<int>(rng() % 12);
    const int k = 1 + static_cast<int>(rng() % std::min(5, n));
    CostOptions options = random_zero_bubble_options(rng, k);
    options.chunks = 1 + static_cast<int>(rng() % 6);
    const bool capped = rng() % 2 == 0;
    if (capped) options.memory_caps_bytes = {int64_t{1000} + static_cast<int64_t>(rng() % 8000)};
    const CostModel model(testing::random_layers(rng, n, false), k, options);
    const std::vector<int> first = testing::random_cuts(rng, n, k);
    std::vector<int> balance;
    for (int s = 0; s < k; ++s) balance.push_back(first[s + 1] - first[s]);

    // The budget by hand: the cap, or 1F1B's busiest stage on this balance.
    int64_t budget = capped ? options.memory_caps_bytes[0] : 0;
    if (!capped) {
      CostOptions one = options;
      one.schedule = ScheduleKind::kOneFOneB;
      const CostModel one_f_one_b(model.layers(), k, one);
      for (int s = 0; s < k; ++s) {
        budget = std::max(budget, one_f_one_b.memory_bytes(s, first[s], first[s + 1]));
      }
    }
    const std::vector<int> delays = bounded_weight_delays(model, balance);
    ASSERT_EQ(delays.size(), static_cast<size_t>(k));
    for (int s = 0; s < k; ++s) {
      SCOPED_TRACE("case " + std::to_string(t) + ", stage " + std::to_string(s));
      const int longest = std::min(s, options.chunks);  // H1's
      ASSERT_GE(delays[s], pipeline::kWholeBackward);
      ASSERT_LE(delays[s], longest);
      if (delays[s] >= 0) {
        EXPECT_LE(peak_at_delay(model, s, delays[s], first[s], first[s + 1]), budget);
      }
      if (delays[s] < longest) {
        EXPECT_GT(peak_at_delay(model, s, delays[s] + 1, first[s], first[s + 1]), budget);
      }
    }
  }
}

TEST(WeightDelays, WhatBHoldsForNothingCostsNothingSoH1sDelaysStay) {
  std::vector<LayerCost> layers(6);
  for (LayerCost& layer : layers) {
    layer.forward_ms = layer.backward_ms = 1;
    layer.activation_bytes = 100;
    layer.weight_held_bytes = 0;
  }
  CostOptions options;
  options.schedule = ScheduleKind::kZeroBubbleH1;
  options.checkpoint = pipeline::CheckpointMode::kNever;
  options.chunks = 8;
  const CostModel model(layers, 3, options);
  EXPECT_EQ(bounded_weight_delays(model, {2, 2, 2}), (std::vector<int>{0, 1, 2}));
  // Holding as much as the activations, stage s holds 3 micro-batches' worth at H1's delay s:
  // 1F1B's first stage's peak.
  for (LayerCost& layer : layers) layer.weight_held_bytes = 100;
  const CostModel holding(layers, 3, options);
  EXPECT_EQ(bounded_weight_delays(holding, {2, 2, 2}), (std::vector<int>{0, 1, 2}));
  // Holding 1.5 times that, stage 2 fits 2 micro-batches waiting (600 bytes), not 3; stage 1
  // not even 1 beside the 2 it has in flight at delay 1 (400 + 300). Stage 0, whose B computes
  // nothing, holds its activations and the gradient it received (200 + 100): not even W right
  // after B fits beside the 2 in flight (400 + 300), and it runs its backward whole.
  for (LayerCost& layer : layers) layer.weight_held_bytes = 150;
  layers[2].input_grad_bytes = 100;
  const CostModel heavier(layers, 3, options);
  EXPECT_EQ(bounded_weight_delays(heavier, {2, 2, 2}),
            (std::vector<int>{pipeline::kWholeBackward, 0, 1}));
}

// The simulated step of zb-h1 on `balance` with `delays`.
double step_with_delays(const CostModel& model, const std::vector<int>& balance,
                        const std::vector<int>& delays) {
  CostOptions options = model.options();
  options.schedule = ScheduleKind::kZeroBubbleH1;
  options.weight_delays = delays;
  const CostModel priced(model.layers(), model.stage_count(), options);
  return simulate_balance(priced, balance, options.chunks).step_ms;
}

// Calls `visit` with every delay vector whose stage s runs kWholeBackward .. bounds[s].
void for_each_delays(const std::vector<int>& bounds, std::vector<int>& delays, size_t s,
                     const std::function<void(const std::vector<int>&)>& visit) {
  if (s == bounds.size()) {
    visit(delays);
    return;
  }
  for (int d = pipeline::kWholeBackward; d <= bounds[s]; ++d) {
    delays[s] = d;
    for_each_delays(bounds, delays, s + 1, visit);
  }
}

// Random layers whose split backward costs more or less than their whole one: B measured apart
// at 0.8 to 1.6 times backward - W.
std::vector<LayerCost> layers_with_measured_b(std::mt19937& rng, int n) {
  std::vector<LayerCost> layers = testing::random_layers(rng, n, false);
  std::uniform_real_distribution<double> factor(0.8, 1.6);
  for (LayerCost& layer : layers) {
    layer.input_grad_ms = (layer.backward_ms - layer.weight_ms) * factor(rng);
  }
  return layers;
}

TEST(WeightDelays, TheFastestAreTheBestOfEveryCombinationWithinTheBounds) {
  std::mt19937 rng(23);
  for (int t = 0; t < 200; ++t) {
    const int n = 2 + static_cast<int>(rng() % 10);
    const int k = 1 + static_cast<int>(rng() % std::min(4, n));
    CostOptions options = random_zero_bubble_options(rng, k);
    const CostModel model(layers_with_measured_b(rng, n), k, options);
    const std::vector<int> first = testing::random_cuts(rng, n, k);
    std::vector<int> balance;
    for (int s = 0; s < k; ++s) balance.push_back(first[s + 1] - first[s]);

    const std::vector<int> bounds = bounded_weight_delays(model, balance);
    double best_ms = std::numeric_limits<double>::infinity();
    std::vector<int> delays(k);
    for_each_delays(bounds, delays, 0, [&](const std::vector<int>& d) {
      best_ms = std::min(best_ms, step_with_delays(model, balance, d));
    });
    const std::vector<int> fastest = fastest_weight_delays(model, balance);
    SCOPED_TRACE("case " + std::to_string(t));
    ASSERT_EQ(fastest.size(), bounds.size());
    for (int s = 0; s < k; ++s) {
      EXPECT_GE(fastest[s], pipeline::kWholeBackward);
      EXPECT_LE(fastest[s], bounds[s]);  // within the memory budget
    }
    EXPECT_NEAR(step_with_delays(model, balance, fastest), best_ms, 1e-9 * best_ms);
  }
}

// Beyond kExhaustiveDelayCombinations the search descends one stage at a time: no single
// stage's other delay is faster, and the result is never slower than the bounded delays.
TEST(WeightDelays, ManyStagesDescendToWhereNoStageAloneDoesBetter) {
  std::mt19937 rng(24);
  for (int t = 0; t < 10; ++t) {
    const int k = 8;
    CostOptions options = random_zero_bubble_options(rng, k);
    options.chunks = 8;
    options.checkpoint = pipeline::CheckpointMode::kNever;
    options.memory_caps_bytes = {int64_t{1} << 40};  // every delay up to H1's fits
    const CostModel model(layers_with_measured_b(rng, 16), k, options);
    const std::vector<int> balance(k, 2);
    const std::vector<int> bounds = bounded_weight_delays(model, balance);
    ASSERT_EQ(bounds, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));  // 9! combinations

    const std::vector<int> fastest = fastest_weight_delays(model, balance);
    const double fastest_ms = step_with_delays(model, balance, fastest);
    SCOPED_TRACE("case " + std::to_string(t));
    EXPECT_LE(fastest_ms, step_with_delays(model, balance, bounds));
    for (int s = 0; s < k; ++s) {
      std::vector<int> other = fastest;
      for (int d = pipeline::kWholeBackward; d <= bounds[s]; ++d) {
        other[s] = d;
        EXPECT_GE(step_with_delays(model, balance, other), fastest_ms * (1 - 1e-9)) << s << d;
      }
    }
  }
}

// A split that costs as much as a whole backward in B alone, with W on top, pays nowhere it
// could be avoided: the later stages run their backward whole. The first stage's B computes
// nothing (its W is its whole backward), so splitting it costs nothing, and ties keep H1's delay.
// Where B + W cost what the whole backward does, H1's delays are fastest.
TEST(WeightDelays, ASplitThatCostsMoreThanItSavesIsNotMade) {
  std::vector<LayerCost> layers(6);
  for (LayerCost& layer : layers) {
    layer.forward_ms = 1;
    layer.backward_ms = 2;
    layer.weight_ms = 1;
    layer.input_grad_ms = 2;
  }
  CostOptions options;
  options.schedule = ScheduleKind::kZeroBubbleH1;
  options.checkpoint = pipeline::CheckpointMode::kNever;
  options.chunks = 8;
  options.memory_caps_bytes = {int64_t{1} << 40};
  const CostModel dear(layers, 3, options);
  EXPECT_EQ(fastest_weight_delays(dear, {2, 2, 2}),
            (std::vector<int>{0, pipeline::kWholeBackward, pipeline::kWholeBackward}));
  for (LayerCost& layer : layers) layer.input_grad_ms = 1;
  const CostModel even(layers, 3, options);
  EXPECT_EQ(fastest_weight_delays(even, {2, 2, 2}), (std::vector<int>{0, 1, 2}));
}

TEST(WeightDelays, PartitionChoosesThemUnlessGivenAndKeepsOneFOneBsPeak) {
  std::mt19937 rng(22);
  for (int t = 0; t < 100; ++t) {
    const int n = 2 + static_cast<int>(rng() % 10);
    const int k = 1 + static_cast<int>(rng() % std::min(4, n));
    CostOptions options = random_zero_bubble_options(rng, k);
    std::vector<LayerCost> layers = testing::random_layers(rng, n, false);
    const CostModel model(layers, k, options);
    const Plan plan = partition(model, Algorithm::kDp);
    EXPECT_EQ(plan.weight_delays, fastest_weight_delays(model, plan.balance)) << t;
    // The balance is 1F1B's (W does not change the per-micro-batch work) ...
    CostOptions one = options;
    one.schedule = ScheduleKind::kOneFOneB;
    const Plan one_plan = partition(CostModel(layers, k, one), Algorithm::kDp);
    EXPECT_EQ(plan.balance, one_plan.balance) << t;
    // ... and no stage holds more than 1F1B's busiest.
    const std::vector<int64_t> one_peaks = one_plan.device_memory_bytes();
    const int64_t budget = *std::max_element(one_peaks.begin(), one_peaks.end());
    for (size_t s = 0; s < plan.stages.size(); ++s) {
      EXPECT_LE(plan.stages[s].memory_bytes, budget) << t << ", stage " << s;
    }
    // Given delays are kept.
    options.weight_delays = std::vector<int>(k, std::min(1, options.chunks));
    EXPECT_EQ(partition(CostModel(layers, k, options), Algorithm::kDp).weight_delays,
              options.weight_delays);
  }
}

}  // namespace
}  // namespace pipebal::balance
