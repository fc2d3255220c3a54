// Pooling profile rounds: medians over every round's samples, per layer and per size, and one
// clear error when the rounds profiled different things.
#include "pipebal/profiler/profile_merge.h"

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

namespace pipebal::profiler {
namespace {

LayerProfile layer(const std::string& name, std::vector<double> forward,
                   std::vector<double> backward, int64_t activation_bytes) {
  LayerProfile l;
  l.name = name;
  l.type = "Linear";
  l.forward_samples_ms = std::move(forward);
  l.backward_samples_ms = std::move(backward);
  l.activation_bytes = activation_bytes;
  std::vector<LayerProfile> alone = {l};
  summarise_passes(alone);  // one layer: its own medians
  return alone.front();
}

// Two layers at the profile's size and at one more size; `slow` scales every time.
Profile round(double slow, int64_t activation_bytes) {
  Profile p;
  p.model = "m";
  p.layers = {layer("0", {1 * slow, 2 * slow}, {3 * slow}, activation_bytes),
              layer("1", {10 * slow}, {20 * slow, 40 * slow}, activation_bytes)};
  p.sizes = {{4, 8, {layer("0", {5 * slow}, {6 * slow}, 0), layer("1", {7 * slow}, {8 * slow}, 0)}},
             {2, 16, p.layers}};
  return p;
}

TEST(ProfileMerge, MediansAreOverEveryRoundsSamples) {
  // A quick round, a round at half speed, another quick one: the slow round is outvoted.
  const Profile pooled = merge_profiles({round(1, 100), round(2, 200), round(1, 300)});
  ASSERT_EQ(pooled.layers.size(), 2u);
  EXPECT_EQ(pooled.layers[0].forward_samples_ms, (std::vector<double>{1, 2, 2, 4, 1, 2}));
  EXPECT_DOUBLE_EQ(pooled.layers[0].forward_ms, 2);    // of 1 1 2 2 2 4
  EXPECT_DOUBLE_EQ(pooled.layers[0].backward_ms, 3);   // of 3 6 3
  EXPECT_DOUBLE_EQ(pooled.layers[1].forward_ms, 10);   // of 10 20 10
  EXPECT_DOUBLE_EQ(pooled.layers[1].backward_ms, 40);  // of 20 40 40 80 20 40
  // NumPy's percentiles of the pooled samples 1 1 2 2 2 4.
  EXPECT_DOUBLE_EQ(pooled.layers[0].forward_p10_ms, 1);
  EXPECT_DOUBLE_EQ(pooled.layers[0].forward_p90_ms, 3);
  // Every size pooled too.
  ASSERT_EQ(pooled.sizes.size(), 2u);
  EXPECT_EQ(pooled.sizes[0].layers[1].backward_samples_ms, (std::vector<double>{8, 16, 8}));
  EXPECT_DOUBLE_EQ(pooled.sizes[0].layers[1].backward_ms, 8);
  EXPECT_DOUBLE_EQ(pooled.sizes[1].layers[1].backward_ms, 40);
  // Memory is the first round's.
  EXPECT_EQ(pooled.layers[0].activation_bytes, 100);
}

// The machine's load is over every round that knows its own, weighted by their lengths.
TEST(ProfileMerge, TheMachinesLoadIsOverEveryRound) {
  std::vector<Profile> rounds = {round(1, 0), round(1, 0), round(1, 0)};
  rounds[0].environment.machine_load = MachineLoad{1, 2, 1.2, 0, std::nullopt, 0};
  rounds[2].environment.machine_load = MachineLoad{3, 2, 0.4, 0.2, std::nullopt, 0};
  const std::optional<MachineLoad> load = merge_profiles(rounds).environment.machine_load;
  ASSERT_TRUE(load.has_value());
  EXPECT_DOUBLE_EQ(load->seconds, 4);
  EXPECT_DOUBLE_EQ(load->others_cores, (1.2 * 1 + 0.4 * 3) / 4);
  EXPECT_DOUBLE_EQ(load->steal_cores, 0.2 * 3 / 4);
  EXPECT_FALSE(merge_profiles({round(1, 0)}).environment.machine_load.has_value());
}

// Five passes over three layers of 1, 2 and 3 ms, three of them interrupted by 0.5 ms, each time
// in another layer: every layer's median misses its interruption, every such pass has one.
TEST(SummarisePasses, LayersAddUpToTheMedianPassEachKeepingItsShare) {
  std::vector<LayerProfile> layers = {layer("0", {1, 1, 1.5, 1, 1}, {2, 2, 2, 2, 2}, 0),
                                      layer("1", {2, 2.5, 2, 2, 2}, {4, 4, 4, 4, 4}, 0),
                                      layer("2", {3, 3, 3, 3.5, 3}, {6, 6, 6, 6, 6}, 0)};
  // The split passes: B and W scaled together, by their passes' totals (7 7 8 7 7 over 7).
  layers[0].input_grad_samples_ms = {1, 1, 1, 1, 1};
  layers[0].weight_samples_ms = {1, 1, 2, 1, 1};
  layers[1].input_grad_samples_ms = {2, 2, 2, 2, 2};
  layers[1].weight_samples_ms = {3, 3, 3, 3, 3};
  summarise_passes(layers);
  const double forward = 6.5 / 6;  // the median pass (6 6.5 6.5 6.5 6) over 1 + 2 + 3
  for (int i = 0; i < 3; ++i) {
    EXPECT_DOUBLE_EQ(layers[i].forward_ms, forward * (i + 1)) << i;
    EXPECT_DOUBLE_EQ(layers[i].backward_ms, 2.0 * (i + 1)) << "no interruption, no change";
    EXPECT_LE(layers[i].forward_p10_ms, layers[i].forward_ms);
    EXPECT_GE(layers[i].forward_p90_ms, layers[i].forward_ms);
  }
  EXPECT_DOUBLE_EQ(layers[0].forward_ms + layers[1].forward_ms + layers[2].forward_ms, 6.5);
  EXPECT_DOUBLE_EQ(layers[0].weight_ms, 1.0);  // the median pass is not the interrupted one
  EXPECT_DOUBLE_EQ(layers[1].weight_ms, 3.0);
  // A layer without a sample per pass (a profile cut short) leaves every layer its own median.
  layers[2].forward_samples_ms.pop_back();
  summarise_passes(layers);
  EXPECT_DOUBLE_EQ(layers[0].forward_ms, 1.0);
  EXPECT_DOUBLE_EQ(layers[2].forward_ms, 3.0);
}

TEST(ProfileMerge, TheEnginesCostsAreTheMediansOfTheRoundsThatMeasuredThem) {
  std::vector<Profile> rounds = {round(1, 100), round(1, 100), round(1, 100), round(1, 100)};
  EXPECT_FALSE(merge_profiles(rounds).engine.has_value());
  rounds[0].engine = balance::EngineCost{0.3, 0.01, 0.04};
  rounds[1].engine = balance::EngineCost{0.1, 0.05, 0.06};
  rounds[3].engine = balance::EngineCost{0.2, 0.02, 0.02};
  const Profile pooled = merge_profiles(rounds);
  ASSERT_TRUE(pooled.engine.has_value());
  EXPECT_DOUBLE_EQ(pooled.engine->step_ms, 0.2);
  EXPECT_DOUBLE_EQ(pooled.engine->action_ms, 0.02);
  EXPECT_DOUBLE_EQ(pooled.engine->handoff_ms, 0.04);
}

TEST(ProfileMerge, OneRoundIsItself) {
  const Profile pooled = merge_profiles({round(1, 100)});
  EXPECT_EQ(pooled.layers[1].backward_samples_ms, (std::vector<double>{20, 40}));
  EXPECT_DOUBLE_EQ(pooled.layers[1].backward_ms, 30);
}

TEST(ProfileMerge, RoundsOfDifferentThingsAreRefused) {
  EXPECT_THROW(merge_profiles({}), std::invalid_argument);
  Profile fewer = round(1, 0);
  fewer.layers.pop_back();
  Profile renamed = round(1, 0);
  renamed.layers[1].name = "other";
  Profile resized = round(1, 0);
  resized.sizes[1].micro_batch_size = 32;
  Profile fewer_sizes = round(1, 0);
  fewer_sizes.sizes.pop_back();
  Profile layer_missing_at_a_size = round(1, 0);
  layer_missing_at_a_size.sizes[0].layers.pop_back();
  const std::vector<std::pair<Profile, std::string>> cases = {
      {fewer, "profile round 2 has 1 layers, round 1 has 2"},
      {renamed, "profile round 2 has layer 1 'other' (Linear), round 1 has '1' (Linear)"},
      {resized, "profile round 2 has micro-batch size 32 where round 1 has 16"},
      {fewer_sizes, "profile round 2 has 1 micro-batch sizes, round 1 has 2"},
      {layer_missing_at_a_size,
       "profile round 2 has 1 layers at micro-batch size 8, round 1 has 2"},
  };
  for (const auto& [second, message] : cases) {
    try {
      merge_profiles({round(1, 0), second});
      ADD_FAILURE() << "no error for: " << message;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), message);
    }
  }
}

}  // namespace
}  // namespace pipebal::profiler
