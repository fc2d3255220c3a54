// Plans: costing a balance, the prediction, and the pipebal.plan/1 round trip.
#include "pipebal/balance/plan.h"

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include "tests/support/scratch_dir.h"

#include "pipebal/balance/input_specs.h"
#include "pipebal/balance/partition.h"

namespace pipebal::balance {
namespace {

using nlohmann::json;

CostModel four_equal_layers(CostOptions options) {
  std::vector<LayerCost> layers(4);
  for (auto& l : layers) {
    l.forward_ms = 1;
    l.backward_ms = 2;
    l.param_bytes = 10;
    l.activation_bytes = 5;
    l.output_bytes = 100;
  }
  return CostModel(layers, 2, options);
}

CostOptions plain(int chunks) {
  CostOptions options;
  options.checkpoint = pipeline::CheckpointMode::kNever;
  options.chunks = chunks;
  return options;
}

TEST(Plan, PredictsGPipeStepAndSpeedUp) {
  const Plan plan = make_plan(four_equal_layers(plain(4)), {2, 2}, "uniform");
  // Two stages of F = 2, B = 4: (4 + 1) * (2 + 4) = 30 ms. Unpipelined, the whole mini-batch
  // is one micro-batch four times the size: 2 stages * 4 * 6 ms = 48 ms.
  EXPECT_DOUBLE_EQ(plan.bottleneck_ms, 6);
  EXPECT_DOUBLE_EQ(plan.prediction.step_ms, 30);
  EXPECT_DOUBLE_EQ(plan.prediction.naive_step_ms, 48);
  EXPECT_DOUBLE_EQ(plan.prediction.speedup, 48.0 / 30.0);
  EXPECT_DOUBLE_EQ(plan.prediction.bubble_fraction, 1.0 - 48.0 / 60.0);
  EXPECT_EQ(plan.stages[1].first_layer, 2);
  EXPECT_EQ(plan.stages[1].memory_bytes, 40 + 4 * (100 + 10));  // inputs and activations
  EXPECT_TRUE(plan.fits_memory());
}

TEST(Plan, SimulatingFewerMicroBatchesScalesTheirCosts) {
  const CostModel model = four_equal_layers(plain(4));
  const SimulationResult two = simulate_balance(model, {2, 2}, 2);
  // Micro-batches twice the profiled size: F = 4, B = 8 per stage, (2 + 1) * 12 = 36 ms.
  EXPECT_DOUBLE_EQ(two.step_ms, 36);
  // GPipe without checkpointing keeps both micro-batches' inputs and activations, each twice the
  // profiled size: 2 * (2 * 100 + 2 * 10) bytes.
  EXPECT_EQ(two.peak_bytes[1], 40 + 2 * (200 + 20));
}

TEST(Plan, RejectsABalanceThatDoesNotFit) {
  const CostModel model = four_equal_layers(plain(1));
  const std::vector<std::pair<std::vector<int>, std::string>> cases = {
      {{4}, "balance 4 has 1 entry for 2 stages"},
      {{3, 2}, "balance 3,2 sums to 5, but the model has 4 layers"},
      {{4, 0}, "balance 4,0: stage 1 has 0 layers; every stage needs at least one"},
      {{1, 1, 2}, "balance 1,1,2 has 3 entries for 2 stages"}};
  for (const auto& [bad, message] : cases) {
    try {
      make_plan(model, bad, "x");
      ADD_FAILURE();
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find(message), std::string::npos) << error.what();
    }
  }
}

TEST(Plan, JsonRoundTripKeepsEveryField) {
  CostOptions options;
  options.chunks = 3;
  options.schedule = pipeline::ScheduleKind::kOneFOneB;
  options.memory_caps_bytes = {1000, 2000};
  options.device_speeds = {1.0, 0.5};
  options.bandwidth_bytes_per_ms = 33.3;
  options.param_scale = 4;
  Plan plan = partition(four_equal_layers(options), Algorithm::kDp);
  plan.model = "mlp:layers=4";
  plan.threads_per_stage = 3;
  const json doc = plan_to_json(plan);
  EXPECT_EQ(doc["schema"], "pipebal.plan/1");
  EXPECT_EQ(doc["stages"][1]["memory_cap_bytes"], 2000);
  const Plan back = plan_from_json(json::parse(doc.dump()));
  EXPECT_EQ(back.model, plan.model);
  EXPECT_EQ(back.algorithm, "dp");
  EXPECT_EQ(back.balance, plan.balance);
  EXPECT_EQ(back.bottleneck_ms, plan.bottleneck_ms);
  EXPECT_EQ(back.chunks, 3);
  EXPECT_EQ(back.schedule, pipeline::ScheduleKind::kOneFOneB);
  EXPECT_EQ(back.checkpoint, plan.checkpoint);
  EXPECT_EQ(back.param_scale, 4);
  EXPECT_EQ(back.bandwidth_bytes_per_ms, 33.3);
  EXPECT_EQ(back.threads_per_stage, 3);
  ASSERT_EQ(back.stages.size(), plan.stages.size());
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    EXPECT_EQ(back.stages[s].first_layer, plan.stages[s].first_layer);
    EXPECT_EQ(back.stages[s].layers, plan.stages[s].layers);
    EXPECT_EQ(back.stages[s].time_ms, plan.stages[s].time_ms);
    EXPECT_EQ(back.stages[s].transfer_ms, plan.stages[s].transfer_ms);
    EXPECT_EQ(back.stages[s].memory_bytes, plan.stages[s].memory_bytes);
    EXPECT_EQ(back.stages[s].timed_memory_bytes, plan.stages[s].timed_memory_bytes);
    EXPECT_EQ(back.stages[s].memory_cap_bytes, plan.stages[s].memory_cap_bytes);
    EXPECT_EQ(back.stages[s].speed, plan.stages[s].speed);
  }
  EXPECT_EQ(back.prediction.step_ms, plan.prediction.step_ms);
  EXPECT_EQ(back.prediction.naive_step_ms, plan.prediction.naive_step_ms);
  EXPECT_EQ(back.prediction.speedup, plan.prediction.speedup);
  EXPECT_EQ(back.prediction.bubble_fraction, plan.prediction.bubble_fraction);
  EXPECT_EQ(back.prediction.schedule, plan.prediction.schedule);
  EXPECT_EQ(back.prediction.chunks, 3);
}

TEST(Plan, ZeroBubbleCarriesItsWeightDelaysThroughJson) {
  CostOptions options = plain(4);
  options.schedule = pipeline::ScheduleKind::kZeroBubbleH1;
  options.weight_delays = {0, 0};
  const Plan plan = partition(four_equal_layers(options), Algorithm::kDp);
  EXPECT_EQ(plan.weight_delays, (std::vector<int>{0, 0}));
  json doc = plan_to_json(plan);
  EXPECT_EQ(doc["weight_delays"], json({0, 0}));
  EXPECT_EQ(plan_from_json(doc).weight_delays, (std::vector<int>{0, 0}));
  // A plan from before delays were written runs H1's: none read.
  doc.erase("weight_delays");
  EXPECT_TRUE(plan_from_json(doc).weight_delays.empty());
  EXPECT_FALSE(plan_to_json(partition(four_equal_layers(plain(4)), Algorithm::kDp))
                   .contains("weight_delays"));
}

TEST(Plan, UnlimitedCapsAreLeftOutOfTheJson) {
  const Plan plan = partition(four_equal_layers(plain(2)), Algorithm::kUniform);
  const json doc = plan_to_json(plan);
  EXPECT_FALSE(doc["stages"][0].contains("memory_cap_bytes"));
  EXPECT_FALSE(doc.contains("threads_per_stage"));  // not said: train's own default
  EXPECT_EQ(plan_from_json(doc).stages[0].memory_cap_bytes, kUnlimitedBytes);
}

TEST(Plan, ReaderRejectsBadDocumentsWithTheField) {
  const json good = plan_to_json(partition(four_equal_layers(plain(2)), Algorithm::kUniform));
  auto expect_error = [](const json& doc, const std::string& message) {
    try {
      plan_from_json(doc);
      ADD_FAILURE() << "accepted; expected: " << message;
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find(message), std::string::npos) << error.what();
    }
  };
  json doc = good;
  doc["schema"] = "pipebal.plan/2";
  expect_error(doc, "unsupported schema version \"pipebal.plan/2\"");
  doc = good;
  doc.erase("schema");
  expect_error(doc, "missing \"schema\"");
  doc = good;
  doc.erase("bottleneck_ms");
  expect_error(doc, "plan: missing \"bottleneck_ms\"");
  doc = good;
  doc["stages"][1]["time_ms"] = "slow";
  expect_error(doc, "plan: stages[1].time_ms must be a number, not string");
  doc = good;
  doc["balance"] = {1, 3};
  expect_error(doc, "plan: stages[0].layers is 2 but balance[0] is 1");
  doc = good;
  doc["prediction"].erase("speedup");
  expect_error(doc, "plan: missing \"prediction.speedup\"");
  doc = good;
  doc["schedule"] = "zigzag";
  expect_error(doc, "plan: schedule is not valid: unknown schedule 'zigzag'");
  doc["schedule"] = 1;  // its type error said once
  expect_error(doc, "plan: schedule has the wrong type (number)");
  doc = good;
  doc["checkpoint"] = "sometimes";
  expect_error(doc, "plan: checkpoint is not valid: unknown checkpoint mode 'sometimes'");
  doc = good;
  doc["dtype"] = "int8";
  expect_error(doc, "plan: dtype is \"int8\", expected float32, float64, float16 or bfloat16");
  doc = good;
  doc["threads_per_stage"] = -1;
  expect_error(doc, "plan: threads_per_stage is -1, expected 0 to 4096");
  doc = good;
  doc["weight_delays"] = {0, 1};
  expect_error(doc, "plan: weight_delays goes with the zb-h1 schedule, not gpipe");
  doc["schedule"] = "zb-h1";
  doc["weight_delays"] = {0, 1, 1};
  expect_error(doc, "plan: weight_delays has 3 entries but balance has 2");
  doc["weight_delays"] = {0, 9};
  expect_error(doc, "plan: weight_delays[1] is 9");
  doc = good;
  doc["stages"][0]["timed_memory_bytes"] = doc["stages"][0]["memory_bytes"].get<int64_t>() - 1;
  expect_error(doc, "plan: stages[0].timed_memory_bytes is");
  // Inputs train would refuse, or train on another batch than input_shape says.
  doc = good;
  doc["input_shape"] = {16, 16};
  doc["inputs"] = {"float32[16,16]", "int64[16,8]:100"};
  EXPECT_EQ(plan_from_json(doc).inputs.size(), 2u);
  doc["inputs"] = {"garbage"};
  expect_error(doc, "plan: inputs[0] 'garbage': expected DTYPE[SHAPE] or DTYPE[SHAPE]:HIGH");
  doc["inputs"] = {"float33[16,16]"};
  expect_error(doc, "plan: inputs[0] 'float33[16,16]': unknown dtype 'float33' (valid: float32, ");
  doc["inputs"] = {"float32[16,0]"};
  expect_error(doc, "plan: inputs[0] 'float32[16,0]': its shape is not integers from 1 to");
  doc["inputs"] = {"float32[16,4294967296]"};
  expect_error(doc, "plan: inputs[0] 'float32[16,4294967296]': its shape is not integers");
  doc["inputs"] = {"int64[16,8]:many"};
  expect_error(doc, "plan: inputs[0] 'int64[16,8]:many': an integer input needs its range");
  doc["inputs"] = {"int64[16,8]"};
  expect_error(doc, "plan: inputs[0] 'int64[16,8]': an integer input needs its range");
  doc["inputs"] = {"int64[16,8]:0"};
  expect_error(doc, "plan: inputs[0] 'int64[16,8]:0': an integer input needs its range");
  doc["inputs"] = {"float32[16,8]:5"};
  expect_error(doc, "plan: inputs[0] 'float32[16,8]:5': only integer inputs take a range");
  doc["inputs"] = {"float32[16,16]", "int64[8,8]:100"};
  expect_error(doc,
               "plan: inputs[1] 'int64[8,8]:100' has 8 samples, the first input "
               "'float32[16,16]' 16: every input has the mini-batch's");
  doc["inputs"] = {"float32[32,16]"};
  expect_error(doc,
               "plan: inputs[0] 'float32[32,16]' is not input_shape [16,16], which gives "
               "the same input's shape");
}

// The form of an --input spec, read without LibTorch.
TEST(Plan, InputSpecShapesAreReadWithoutLibTorch) {
  EXPECT_EQ(input_spec_shape("float32[32,3,64,64]"), (std::vector<int64_t>{32, 3, 64, 64}));
  EXPECT_EQ(input_spec_shape("int64[32,64]:1000"), (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(input_spec_shape("bool[4]"), (std::vector<int64_t>{4}));
  for (const char* bad :
       {"garbage", "float32", "float32[4,8", "float32]4[", "int8[4]", "float32[4,0]",
        "float32[4,-1]", "float32[4,x]", "float32[4]x", "int64[4]:", "int64[4]:many", "[4,8]",
        "int64[4]", "int64[4]:0", "int32[4]:-3", "float32[4]:5", "bool[4]:2"}) {
    EXPECT_FALSE(input_spec_shape(bad).has_value()) << bad;
  }
}

// The predicted peak adds to what a stage's actions hold the messages it sent that wait: none
// when each receiver takes its message as it comes, one output in flight over a slow link.
TEST(Plan, TimedMemoryAddsTheMessagesWaitingForTheirReceiver) {
  const Plan at_once = make_plan(four_equal_layers(plain(4)), {2, 2}, "uniform");
  EXPECT_EQ(at_once.stages[0].timed_memory_bytes, at_once.stages[0].memory_bytes);
  EXPECT_EQ(at_once.stages[1].timed_memory_bytes, at_once.stages[1].memory_bytes);
  CostOptions options = plain(4);
  options.checkpoint = pipeline::CheckpointMode::kAlways;  // the sender keeps no output
  options.bandwidth_bytes_per_ms = 200;  // a 100-byte output takes 0.5 ms, a quarter of a forward
  const Plan slow_link = make_plan(four_equal_layers(options), {2, 2}, "uniform");
  // Stage 0 holds its parameters and gradients (40 bytes), a recomputation's activations (10)
  // at its peak; at the end of each F, its output in flight.
  EXPECT_EQ(slow_link.stages[0].memory_bytes, 40 + 10);
  EXPECT_EQ(slow_link.stages[0].timed_memory_bytes, 40 + 100);
  EXPECT_EQ(slow_link.device_timed_memory_bytes(),
            (std::vector<int64_t>{40 + 100, slow_link.stages[1].timed_memory_bytes}));
  // A plan written before the field reads it as the timing-free bound.
  json doc = plan_to_json(slow_link);
  doc["stages"][0].erase("timed_memory_bytes");
  EXPECT_EQ(plan_from_json(doc).stages[0].timed_memory_bytes, slow_link.stages[0].memory_bytes);
}

// Another profile of the same model (the machine drifted: every layer twice as slow) prices the
// plan's own balance, schedule, W delays, speeds and link, not a balance of its own.
TEST(Plan, RepricingKeepsThePlansConfigurationAndTakesTheProfilesCosts) {
  CostOptions options = plain(4);
  options.schedule = pipeline::ScheduleKind::kZeroBubbleH1;
  options.weight_delays = {0, 1};
  options.device_speeds = {1.0, 0.5};
  options.bandwidth_bytes_per_ms = 50;
  options.latency_ms = 0.25;
  const CostModel model = four_equal_layers(options);
  Plan plan = make_plan(model, {1, 3}, "hand");  // not what dp would choose
  plan.model = "mlp:layers=4";
  CostProfile profile;
  profile.layers = model.layers();
  const Plan same = reprice_plan(profile, plan);
  EXPECT_EQ(same.balance, plan.balance);
  EXPECT_EQ(same.weight_delays, plan.weight_delays);
  EXPECT_EQ(same.model, plan.model);
  EXPECT_EQ(same.prediction.step_ms, plan.prediction.step_ms);
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    EXPECT_EQ(same.stages[s].time_ms, plan.stages[s].time_ms);
    EXPECT_EQ(same.stages[s].transfer_ms, plan.stages[s].transfer_ms);
    EXPECT_EQ(same.stages[s].memory_bytes, plan.stages[s].memory_bytes);
    EXPECT_EQ(same.stages[s].speed, plan.stages[s].speed);
  }
  // The latency survives the file, so a plan read back prices the same.
  EXPECT_EQ(plan_from_json(plan_to_json(plan)).latency_ms, 0.25);
  EXPECT_EQ(reprice_plan(profile, plan_from_json(plan_to_json(plan))).prediction.step_ms,
            plan.prediction.step_ms);

  for (LayerCost& layer : profile.layers) {
    layer.forward_ms *= 2;
    layer.backward_ms *= 2;
  }
  const Plan slower = reprice_plan(profile, plan);
  EXPECT_EQ(slower.balance, plan.balance);
  EXPECT_DOUBLE_EQ(slower.stages[1].time_ms, 2 * plan.stages[1].time_ms);
  EXPECT_EQ(slower.stages[1].memory_bytes, plan.stages[1].memory_bytes);
  EXPECT_GT(slower.prediction.step_ms, 1.5 * plan.prediction.step_ms);

  profile.layers.pop_back();
  EXPECT_THROW(reprice_plan(profile, plan), std::invalid_argument);
}

TEST(Plan, WritesAndReadsAFile) {
  const std::string path = pipebal::testing::scratch_path("plan.json");
  const Plan plan = partition(four_equal_layers(plain(2)), Algorithm::kDp);
  write_plan(path, plan);
  EXPECT_EQ(read_plan(path).balance, plan.balance);
  EXPECT_THROW(read_plan(path + ".missing"), std::invalid_argument);
}

}  // namespace
}  // namespace pipebal::balance
