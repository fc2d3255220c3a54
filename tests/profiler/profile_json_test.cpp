// profile.json: the schema tag, units in the keys, and that the balancer reads it back.
#include "pipebal/profiler/profile_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include "tests/support/scratch_dir.h"

#include "pipebal/balance/profile_reader.h"
#include "pipebal/common/atomic_file.h"

namespace pipebal::profiler {
namespace {

Profile hand_profile() {
  Profile p;
  p.model = "mlp:layers=1,width=4";
  p.device = "cpu";
  p.backend = "wallclock";
  p.dtype = "float32";
  p.batch_size = 2;
  p.input_shapes = {{2, 4}};
  p.environment.libtorch_version = "1.13.1";
  p.environment.intra_op_threads = 2;
  p.environment.cpu_model = "Test CPU";
  p.environment.warmup = 1;
  p.environment.repeat = 2;
  p.environment.date = "2024-01-02T03:04:05Z";
  LayerProfile a;
  a.index = 0;
  a.name = "fc0";
  a.type = "LinearReLU";
  a.forward_ms = 1.5;
  a.backward_ms = 2.5;
  a.forward_samples_ms = {1.4, 1.6};
  a.backward_samples_ms = {2.4, 2.6};
  a.param_bytes = 80;
  a.activation_bytes = 32;
  a.input_bytes = 16;
  a.output_bytes = 32;
  a.peak_bytes = 64;
  a.backward_peak_bytes = 24;
  a.weight_peak_bytes = 20;
  a.weight_held_bytes = 48;
  a.released_output_bytes = 32;
  LayerProfile b = a;
  b.index = 1;
  b.name = "head";
  b.type = "Linear";
  p.layers = {a, b};
  return p;
}

TEST(ProfileJson, CarriesSchemaEnvironmentAndUnitsInKeys) {
  const nlohmann::json doc = profile_to_json(hand_profile());
  EXPECT_EQ(doc.at("schema"), "pipebal.profile/1");
  EXPECT_EQ(doc.at("batch_size"), 2);
  EXPECT_EQ(doc.at("input_shapes"), nlohmann::json::parse("[[2, 4]]"));
  const nlohmann::json& env = doc.at("environment");
  EXPECT_EQ(env.at("libtorch_version"), "1.13.1");
  EXPECT_EQ(env.at("intra_op_threads"), 2);
  EXPECT_EQ(env.at("cpu_model"), "Test CPU");
  EXPECT_TRUE(env.at("gpu_name").is_null());
  EXPECT_EQ(env.at("warmup"), 1);
  EXPECT_EQ(env.at("repeat"), 2);
  EXPECT_EQ(env.at("date"), "2024-01-02T03:04:05Z");
  const nlohmann::json& layer = doc.at("layers").at(1);
  for (const char* key :
       {"index", "name", "type", "forward_ms", "backward_ms", "forward_p10_ms", "forward_p90_ms",
        "backward_p10_ms", "backward_p90_ms", "param_bytes", "buffer_bytes", "activation_bytes",
        "input_bytes", "output_bytes", "peak_bytes", "backward_peak_bytes", "weight_peak_bytes",
        "forward_samples_ms", "backward_samples_ms"}) {
    EXPECT_TRUE(layer.contains(key)) << key;
  }
  EXPECT_EQ(layer.at("forward_samples_ms").size(), 2u);
  EXPECT_DOUBLE_EQ(doc.at("totals").at("forward_ms").get<double>(), 3.0);
}

TEST(ProfileJson, TheEnginesCostsReachTheBalancer) {
  Profile p = hand_profile();
  EXPECT_FALSE(profile_to_json(p).contains("engine"));
  EXPECT_FALSE(cost_profile(p).engine.has_value());
  p.engine = balance::EngineCost{0.25, 0.125, 0.0625};
  const nlohmann::json doc = profile_to_json(p);
  EXPECT_DOUBLE_EQ(doc.at("engine").at("step_ms").get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(doc.at("engine").at("handoff_ms").get<double>(), 0.0625);
  const balance::CostProfile cost = cost_profile(p);
  ASSERT_TRUE(cost.engine.has_value());
  EXPECT_DOUBLE_EQ(cost.engine->step_ms, 0.25);
  EXPECT_DOUBLE_EQ(cost.engine->action_ms, 0.125);
  EXPECT_DOUBLE_EQ(cost.engine->handoff_ms, 0.0625);
}

TEST(ProfileJson, BalancerReadsTheWrittenFile) {
  const std::string path = pipebal::testing::scratch_path("profile.json");
  write_profile(path, hand_profile());
  const balance::CostProfile cost = balance::read_profile(path);
  EXPECT_EQ(cost.model, "mlp:layers=1,width=4");
  EXPECT_EQ(cost.batch_size, 2);
  ASSERT_EQ(cost.layers.size(), 2u);
  EXPECT_EQ(cost.layers[1].name, "head");
  EXPECT_DOUBLE_EQ(cost.layers[1].forward_ms, 1.5);
  EXPECT_DOUBLE_EQ(cost.layers[1].backward_ms, 2.5);
  EXPECT_EQ(cost.layers[1].param_bytes, 80);
  EXPECT_EQ(cost.layers[1].activation_bytes, 32);
  EXPECT_EQ(cost.layers[1].output_bytes, 32);
  EXPECT_EQ(cost.layers[1].input_bytes, 16);
  EXPECT_EQ(cost.layers[1].peak_bytes, 64);
  EXPECT_EQ(cost.layers[1].backward_peak_bytes, 24);
  EXPECT_EQ(cost.layers[1].weight_peak_bytes, 20);
  EXPECT_EQ(cost.layers[1].weight_held_bytes, 48);
  EXPECT_EQ(cost.layers[1].released_output_bytes, 32);
}

// A layer's peaks grow with the micro-batch: each size carries its own.
TEST(ProfileJson, EverySizeCarriesItsOwnPeaks) {
  Profile p = hand_profile();
  Profile::Size twice{/*chunks=*/1, /*micro_batch_size=*/4, p.layers};
  for (LayerProfile& layer : twice.layers) {
    layer.peak_bytes *= 2;
    layer.backward_peak_bytes *= 2;
    layer.weight_peak_bytes *= 2;
    layer.released_output_bytes *= 2;
  }
  p.sizes = {Profile::Size{/*chunks=*/2, /*micro_batch_size=*/2, p.layers}, twice};
  const std::string path = pipebal::testing::scratch_path("profile.json");
  write_profile(path, p);
  const balance::CostProfile cost = balance::read_profile(path);
  ASSERT_EQ(cost.sizes.size(), 2u);
  EXPECT_EQ(cost.sizes[0].layers[1].backward_peak_bytes, 24);
  EXPECT_EQ(cost.sizes[1].layers[1].peak_bytes, 128);
  EXPECT_EQ(cost.sizes[1].layers[1].backward_peak_bytes, 48);
  EXPECT_EQ(cost.sizes[1].layers[1].weight_peak_bytes, 40);
  EXPECT_EQ(cost.sizes[1].layers[1].released_output_bytes, 64);
}

}  // namespace
}  // namespace pipebal::profiler
