// The planner's recommendation: the plain model on more threads is weighed, and pipelining or
// more devices are recommended only for a clear predicted gain over not pipelining.
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "pipebal/balance/planner.h"
#include "planner_support.h"

namespace pipebal::balance {
namespace {

using pipeline::CheckpointMode;
using pipeline::ScheduleKind;
using testing::on_devices;
using testing::on_two_devices_with_two_threads;
using testing::profile_of;

// On CPUs the alternative to two stages of one thread is the plain model on two threads.
TEST(Planner, WeighsThePlainModelOnMoreThreads) {
  const CostProfile profile = profile_of({1, 1, 1, 1}, 0, 8);
  CostProfile wide = profile_of({0.5, 0.5, 0.5, 0.5}, 0, 8);  // twice as fast on two threads
  wide.threads = 2;
  PlanSearch search = on_devices(2);
  search.plain_profiles = {wide};
  const PlanSearchResult result = search_plans(profile, search);
  const Configuration& best = result.ranked.front();
  EXPECT_EQ(best.threads_per_stage, 2);
  EXPECT_EQ(best.devices, 2);
  EXPECT_EQ(best.plan.threads_per_stage, 2);
  EXPECT_EQ(best.plan.balance, std::vector<int>{4});
  EXPECT_NEAR(best.speedup, 2.0, 1e-12);  // beats the pipeline's 16/9
  EXPECT_EQ(describe(best), "the plain model on 2 threads");
  // More threads than devices are not a candidate; another model's profile is refused.
  EXPECT_TRUE(result.plain_threads_not_weighed.empty());
  search.devices = 1;
  search.plain_profiles = {wide};
  const PlanSearchResult one_device = search_plans(profile, search);
  EXPECT_EQ(one_device.ranked.front().threads_per_stage, 0);
  EXPECT_EQ(one_device.plain_threads_not_weighed, std::vector<int>{2});
  search.devices = 2;
  search.plain_profiles = {profile_of({1, 1}, 0, 8)};
  EXPECT_THROW(search_plans(profile, search), std::invalid_argument);
}

// A plain-model profile of another model or input is refused, naming what differs: the layer
// count or mini-batch, a layer's name, the inputs, the dtype; what a hand-written profile leaves
// unsaid is not held against it.
TEST(Planner, RefusesAPlainModelProfileOfAnotherModelOrInput) {
  CostProfile profile = profile_of({1, 1, 1, 1}, 0, 8);
  for (size_t i = 0; i < profile.layers.size(); ++i) {
    profile.layers[i].name = "fc" + std::to_string(i);
  }
  profile.inputs = {"float32[8,16]"};
  profile.dtype = "float32";
  const auto refusal = [&](const CostProfile& wide) -> std::string {
    PlanSearch search = on_devices(2);
    search.plain_profiles = {wide};
    try {
      search_plans(profile, search);
    } catch (const std::invalid_argument& error) {
      return error.what();
    }
    return "";
  };
  CostProfile wide = profile;
  wide.threads = 2;
  EXPECT_EQ(refusal(wide), "");
  CostProfile unsaid = wide;  // hand-written: no names, inputs or dtype
  for (LayerCost& layer : unsaid.layers) layer.name.clear();
  unsaid.inputs.clear();
  unsaid.dtype.clear();
  EXPECT_EQ(refusal(unsaid), "");
  const std::string advice = ": profile the same model and input";
  CostProfile other = wide;
  other.input_shape[0] = 16;
  EXPECT_EQ(refusal(other),
            "a plain-model profile has 4 layers and a mini-batch of 16, the "
            "profile 4 and 8" +
                advice);
  other = wide;
  other.layers[2].name = "emb";
  EXPECT_EQ(refusal(other),
            "a plain-model profile names layer 2 'emb', the profile 'fc2'" + advice);
  other = wide;
  other.inputs = {"int64[8,16]:100"};
  EXPECT_EQ(refusal(other),
            "a plain-model profile has inputs int64[8,16]:100, the profile float32[8,16]" + advice);
  other = wide;
  other.dtype = "float64";
  EXPECT_EQ(refusal(other),
            "a plain-model profile was measured in float64, the profile in float32" + advice);
}

// Pipelining is recommended only when predicted clearly faster than not pipelining: here two
// stages at 8 micro-batches are predicted 16/9 times the plain model's speed and the plain model
// on two threads 1.75 times, a gain of 1.6% for the pipeline.
TEST(Planner, RecommendsPipeliningOnlyForAClearGain) {
  const CostProfile profile = profile_of({1, 1, 1, 1}, 0, 8);
  PlanSearch search = on_two_devices_with_two_threads(1.75);
  const PlanSearchResult result = search_plans(profile, search);
  ASSERT_EQ(result.ranked.front().stages, 2);  // the ranking stays by predicted time
  EXPECT_NEAR(result.ranked.front().speedup, 16.0 / 9.0, 1e-12);
  ASSERT_GT(result.recommended, 0u);
  EXPECT_EQ(result.recommendation().threads_per_stage, 2);
  EXPECT_NEAR(result.recommendation().speedup, 1.75, 1e-12);
  for (size_t k = 0; k < result.recommended; ++k) EXPECT_EQ(result.ranked[k].stages, 2);

  const double gain = (16.0 / 9.0) / 1.75 - 1;
  search.min_gain = gain - 1e-6;
  EXPECT_EQ(search_plans(profile, search).recommended, 0u);
  search.min_gain = gain + 1e-6;
  EXPECT_EQ(search_plans(profile, search).recommendation().threads_per_stage, 2);
  search.min_gain = 0;
  EXPECT_EQ(search_plans(profile, search).recommended, 0u);

  // Without the wide profile the best that does not pipeline is the plain model on one device,
  // 16/9 slower: the pipeline is recommended under any margin below that.
  search.plain_profiles.clear();
  search.min_gain = 0.5;
  EXPECT_EQ(search_plans(profile, search).recommended, 0u);
  search.min_gain = 0.8;
  const PlanSearchResult cautious = search_plans(profile, search);
  EXPECT_EQ(cautious.recommendation().stages, 1);
  EXPECT_DOUBLE_EQ(cautious.recommendation().step_ms, cautious.plain.step_ms);

  // When nothing unpipelined fits the caps, the fastest that fits is recommended: GPipe without
  // checkpointing holds every micro-batch's activations, one stage all of them, two half each.
  search.min_gain = 0.8;
  search.schedules = {ScheduleKind::kGPipe};
  search.checkpoints = {CheckpointMode::kNever};
  search.costs.memory_caps_bytes = {
      static_cast<int64_t>(0.75 * static_cast<double>(cautious.plain.peak_bytes))};
  const PlanSearchResult capped = search_plans(profile, search);
  for (const Configuration& config : capped.ranked) EXPECT_EQ(config.stages, 2);
  ASSERT_FALSE(capped.ranked.empty());
  EXPECT_EQ(capped.recommended, 0u);

  search.costs.memory_caps_bytes.clear();
  for (const double wrong : {-0.01, 11.0, std::numeric_limits<double>::quiet_NaN()}) {
    search.min_gain = wrong;
    EXPECT_THROW(search_plans(profile, search), std::invalid_argument) << wrong;
  }
}

// More devices for the plain model are recommended only for a clear gain too: on two threads it
// is predicted 4% faster than on one device, the pipeline (16/9) 71% faster than that.
TEST(Planner, RecommendsMoreDevicesOnlyForAClearGain) {
  const CostProfile profile = profile_of({1, 1, 1, 1}, 0, 8);
  PlanSearch search = on_two_devices_with_two_threads(1.04);
  search.chunks = {1};  // no pipeline beats the plain model: one micro-batch
  const PlanSearchResult unpipelined = search_plans(profile, search);
  ASSERT_EQ(unpipelined.ranked.front().threads_per_stage, 2);
  EXPECT_NEAR(unpipelined.ranked.front().speedup, 1.04, 1e-12);
  const Configuration& pick = unpipelined.recommendation();
  EXPECT_EQ(pick.devices, 1);
  EXPECT_EQ(pick.stages, 1);
  EXPECT_DOUBLE_EQ(pick.step_ms, unpipelined.plain.step_ms);
  search.min_gain = 0.04 - 1e-6;
  EXPECT_EQ(search_plans(profile, search).recommended, 0u);
  search.min_gain = 0.04 + 1e-6;
  EXPECT_EQ(search_plans(profile, search).recommendation().devices, 1);

  // The pipeline fastest: a margin that passes it over for the plain model passes over the two
  // threads as well when one device is within it too.
  search.chunks.clear();
  search.min_gain = 0.5;
  const PlanSearchResult eager = search_plans(profile, search);
  ASSERT_EQ(eager.ranked.front().stages, 2);
  EXPECT_EQ(eager.recommended, 0u);
  search.min_gain = 0.8;
  const PlanSearchResult cautious_search = search_plans(profile, search);
  const Configuration& cautious = cautious_search.recommendation();
  EXPECT_EQ(cautious.devices, 1);
  EXPECT_EQ(cautious.stages, 1);
  EXPECT_DOUBLE_EQ(cautious.step_ms, eager.plain.step_ms);
}

}  // namespace
}  // namespace pipebal::balance
