// Costs as a function of the micro-batch size: measured sizes exactly, linear interpolation
// between them, proportional extrapolation beyond them, and what a profile may say about sizes.
#include "pipebal/balance/micro_batch_costs.h"

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "pipebal/balance/partition.h"
#include "pipebal/balance/plan.h"
#include "pipebal/balance/profile_reader.h"
#include "pipebal/pipeline/schedule.h"

namespace pipebal::balance {
namespace {

using nlohmann::json;

// Layer i at micro-batch size b: forward 1 + b ms (a fixed cost and a per-sample one),
// backward twice that (B measured apart on layer 0 alone: 1.5 times), activations 100 b bytes,
// input 20 b bytes, output 10 b bytes, 60 b held from B to W (the output among them, released);
// peaks its parameters' gradients (which no size changes) plus 300 b bytes, the backward's alone
// plus 200 b, a W's plus 50 b.
LayerCost layer_at(int i, int64_t b) {
  LayerCost layer;
  layer.name = "l" + std::to_string(i);
  layer.forward_ms = 1.0 + double(b) * (i + 1);
  layer.backward_ms = 2 * layer.forward_ms;
  layer.input_grad_ms = i == 0 ? 1.5 * layer.forward_ms : -1;  // measured on layer 0 only
  layer.param_bytes = 1000 * (i + 1);
  layer.activation_bytes = 100 * b;
  layer.output_bytes = 10 * b;
  layer.input_bytes = 20 * b;
  layer.weight_held_bytes = 60 * b;
  layer.released_output_bytes = 10 * b;
  layer.peak_bytes = layer.param_bytes + 300 * b;
  layer.backward_peak_bytes = layer.param_bytes + 200 * b;
  layer.weight_peak_bytes = layer.param_bytes + 50 * b;
  return layer;
}

// Two layers measured at sizes 2, 8 and 32 of a mini-batch of 64.
CostProfile profile_at_sizes() {
  CostProfile profile;
  profile.batch_size = 8;
  profile.chunks = 8;
  profile.input_shape = {64, 16};
  for (const int64_t b : {2, 8, 32}) {
    SizedCosts sized{b, {layer_at(0, b), layer_at(1, b)}};
    if (b == 8) profile.layers = sized.layers;
    profile.sizes.push_back(sized);
  }
  return profile;
}

// A model under other options (zb-h1's W delays chosen for its plan) keeps the whole batch's
// costs: the one-micro-batch step of a plan whose delays were chosen is priced as that of one
// given the same delays, not from the planned micro-batch's costs.
TEST(MicroBatchCosts, ChosenWeightDelaysKeepTheWholeBatchCosts) {
  const CostProfile profile = profile_at_sizes();
  CostOptions options;
  options.schedule = pipeline::ScheduleKind::kZeroBubbleH1;
  options.chunks = 8;
  const CostModel model = cost_model_for(profile, 2, options);
  ASSERT_EQ(model.whole_batch_layers().size(), 2u);
  const CostModel other = model.with_options(options);
  ASSERT_EQ(other.whole_batch_layers().size(), 2u);
  EXPECT_DOUBLE_EQ(other.whole_batch_layers()[1].forward_ms,
                   model.whole_batch_layers()[1].forward_ms);
  const Plan chosen = partition(model, Algorithm::kDp);
  ASSERT_EQ(chosen.weight_delays.size(), 2u);
  options.weight_delays = chosen.weight_delays;
  const Plan given = plan_balance(cost_model_for(profile, 2, options), chosen.balance, "dp");
  EXPECT_DOUBLE_EQ(chosen.prediction.naive_step_ms, given.prediction.naive_step_ms);
  EXPECT_DOUBLE_EQ(chosen.prediction.step_ms, given.prediction.step_ms);
}

TEST(MicroBatchCosts, AMeasuredSizeIsReturnedAsMeasured) {
  const CostsAtSize at = costs_at_micro_batch_size(profile_at_sizes(), 32);
  EXPECT_EQ(at.source, CostSource::kMeasured);
  EXPECT_DOUBLE_EQ(at.layers[1].forward_ms, layer_at(1, 32).forward_ms);
  EXPECT_EQ(at.layers[1].activation_bytes, 3200);
}

TEST(MicroBatchCosts, BetweenMeasuredSizesCostsAreLinear) {
  // The test's costs are linear in the size, so interpolation must reproduce them exactly.
  for (const int64_t b : {3, 5, 7, 9, 20, 31}) {
    const CostsAtSize at = costs_at_micro_batch_size(profile_at_sizes(), b);
    EXPECT_EQ(at.source, CostSource::kInterpolated) << b;
    for (int i = 0; i < 2; ++i) {
      EXPECT_NEAR(at.layers[i].forward_ms, layer_at(i, b).forward_ms, 1e-12) << b;
      EXPECT_NEAR(at.layers[i].backward_ms, layer_at(i, b).backward_ms, 1e-12) << b;
      EXPECT_NEAR(at.layers[i].input_grad_ms, layer_at(i, b).input_grad_ms, 1e-12) << b;
      EXPECT_EQ(at.layers[i].activation_bytes, layer_at(i, b).activation_bytes) << b;
      EXPECT_EQ(at.layers[i].output_bytes, layer_at(i, b).output_bytes) << b;
      EXPECT_EQ(at.layers[i].input_bytes, layer_at(i, b).input_bytes) << b;
      EXPECT_EQ(at.layers[i].param_bytes, layer_at(i, b).param_bytes) << b;
      EXPECT_EQ(at.layers[i].peak_bytes, layer_at(i, b).peak_bytes) << b;
      EXPECT_EQ(at.layers[i].backward_peak_bytes, layer_at(i, b).backward_peak_bytes) << b;
      EXPECT_EQ(at.layers[i].weight_peak_bytes, layer_at(i, b).weight_peak_bytes) << b;
      EXPECT_EQ(at.layers[i].weight_held_bytes, layer_at(i, b).weight_held_bytes) << b;
      EXPECT_EQ(at.layers[i].released_output_bytes, layer_at(i, b).released_output_bytes) << b;
      EXPECT_EQ(at.layers[i].name, layer_at(i, b).name);
    }
  }
}

TEST(MicroBatchCosts, BeyondMeasuredSizesCostsScaleWithTheNearest) {
  const CostsAtSize small = costs_at_micro_batch_size(profile_at_sizes(), 1);
  EXPECT_EQ(small.source, CostSource::kExtrapolated);
  EXPECT_DOUBLE_EQ(small.layers[0].forward_ms, layer_at(0, 2).forward_ms / 2);
  EXPECT_EQ(small.layers[0].activation_bytes, 100);
  EXPECT_DOUBLE_EQ(small.layers[0].input_grad_ms, layer_at(0, 2).input_grad_ms / 2);
  EXPECT_DOUBLE_EQ(small.layers[1].input_grad_ms, -1);  // not measured stays so
  const CostsAtSize large = costs_at_micro_batch_size(profile_at_sizes(), 64);
  EXPECT_EQ(large.source, CostSource::kExtrapolated);
  EXPECT_DOUBLE_EQ(large.layers[1].forward_ms, layer_at(1, 32).forward_ms * 2);
  EXPECT_EQ(large.layers[1].output_bytes, 640);
  EXPECT_EQ(large.layers[1].input_bytes, 1280);
  EXPECT_EQ(large.layers[1].released_output_bytes, 640);
  // The parameters' gradients in the peaks stay as they are; what is beyond them scales.
  EXPECT_EQ(small.layers[0].peak_bytes, layer_at(0, 1).peak_bytes);
  EXPECT_EQ(large.layers[1].backward_peak_bytes, layer_at(1, 64).backward_peak_bytes);
  EXPECT_EQ(small.layers[0].weight_peak_bytes, layer_at(0, 1).weight_peak_bytes);
  EXPECT_EQ(large.layers[1].weight_peak_bytes, layer_at(1, 64).weight_peak_bytes);
}

TEST(MicroBatchCosts, AOneSizeProfileScalesFromItsSize) {
  CostProfile profile = profile_at_sizes();
  profile.sizes.clear();
  EXPECT_EQ(measured_sizes(profile), std::vector<int64_t>{8});
  EXPECT_EQ(costs_at_micro_batch_size(profile, 8).source, CostSource::kMeasured);
  const CostsAtSize half = costs_at_micro_batch_size(profile, 4);
  EXPECT_EQ(half.source, CostSource::kExtrapolated);
  EXPECT_DOUBLE_EQ(half.layers[0].forward_ms, layer_at(0, 8).forward_ms / 2);
  // Without its batch size a profile's layers are all there is.
  profile.batch_size = 0;
  EXPECT_TRUE(measured_sizes(profile).empty());
  EXPECT_DOUBLE_EQ(costs_at_micro_batch_size(profile, 3).layers[0].forward_ms,
                   layer_at(0, 8).forward_ms);
  EXPECT_THROW(costs_at_micro_batch_size(profile, 0), std::invalid_argument);
}

TEST(MicroBatchCosts, LayersForChunksTakeTheMicroBatchSize) {
  const CostProfile profile = profile_at_sizes();
  EXPECT_EQ(micro_batch_size(64, 3), 22);
  EXPECT_DOUBLE_EQ(layers_for_chunks(profile, 2)[0].forward_ms, layer_at(0, 32).forward_ms);
  EXPECT_DOUBLE_EQ(layers_for_chunks(profile, 4)[1].forward_ms, layer_at(1, 16).forward_ms);
}

TEST(MicroBatchCosts, PlannedChunksAcceptEveryCountBetweenTheMeasuredSizes) {
  const CostProfile profile = profile_at_sizes();
  EXPECT_EQ(planned_chunks(profile, 0), 8);
  EXPECT_EQ(planned_chunks(profile, 2), 2);    // size 32, measured
  EXPECT_EQ(planned_chunks(profile, 5), 5);    // size 13, interpolated
  EXPECT_EQ(planned_chunks(profile, 32), 32);  // size 2, measured
  try {
    planned_chunks(profile, 64);  // size 1
    FAIL() << "size 1 is outside the profiled sizes";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("outside the profiled sizes 2 to 32"),
              std::string::npos)
        << error.what();
  }
}

// A hand-written profile that gives its micro-batch size and mini-batch but not its count: the
// count is the one that cuts the mini-batch into micro-batches of the size measured, and other
// counts are refused as for a profile that says it, not scaled from the one size silently.
TEST(MicroBatchCosts, AProfileThatDoesNotSayItsChunksIsPlannedForTheSizeItMeasured) {
  CostProfile profile;
  profile.layers = {layer_at(0, 16), layer_at(1, 16)};
  profile.batch_size = 16;
  profile.input_shape = {32, 8};
  EXPECT_EQ(measured_chunks(profile), 2);
  EXPECT_EQ(planned_chunks(profile, 0), 2);
  EXPECT_EQ(planned_chunks(profile, 2), 2);
  try {
    planned_chunks(profile, 4);
    FAIL() << "4 chunks of 8 samples were not measured";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what())
                  .find("measured at micro-batch size 16 (32 samples in 2 "
                        "chunks); --chunks 4 means micro-batches of 8"),
              std::string::npos)
        << error.what();
  }
  profile.input_shape = {30, 8};  // no count cuts 30 samples into micro-batches of 16
  EXPECT_EQ(measured_chunks(profile), 0);
  profile.input_shape = {31, 8};  // 2 micro-batches of 16 (rounded up), as the engine cuts it
  EXPECT_EQ(measured_chunks(profile), 2);
  profile.input_shape.clear();  // nothing to derive it from: any count, the costs as given
  EXPECT_EQ(measured_chunks(profile), 0);
  EXPECT_EQ(planned_chunks(profile, 0), pipeline::kDefaultChunks);
  EXPECT_EQ(planned_chunks(profile, 7), 7);
}

json sized_doc() {
  const auto layer = [](int64_t b) {
    return json{{"forward_ms", 1.0 * b},
                {"backward_ms", 2.0 * b},
                {"activation_bytes", 10 * b},
                {"output_bytes", b}};
  };
  json primary = layer(4);
  primary["name"] = "fc";
  primary["param_bytes"] = 4096;
  return {{"schema", "pipebal.profile/1"},
          {"batch_size", 4},
          {"chunks", 2},
          {"input_shape", {8, 3}},
          {"layers", {primary}},
          {"sizes",
           {{{"chunks", 8}, {"micro_batch_size", 1}, {"layers", {layer(1)}}},
            {{"chunks", 2}, {"micro_batch_size", 4}, {"layers", {layer(4)}}}}}};
}

void expect_error(const json& doc, const std::string& message) {
  try {
    profile_from_json(doc);
    FAIL() << "expected an error containing: " << message;
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find(message), std::string::npos) << error.what();
  }
}

TEST(MicroBatchCosts, TheReaderTakesSizesWithTheLayersNamesAndParameters) {
  const CostProfile profile = profile_from_json(sized_doc());
  ASSERT_EQ(profile.sizes.size(), 2u);
  EXPECT_EQ(profile.sizes[0].micro_batch_size, 1);
  EXPECT_EQ(profile.sizes[0].layers[0].name, "fc");
  EXPECT_EQ(profile.sizes[0].layers[0].param_bytes, 4096);
  EXPECT_DOUBLE_EQ(profile.sizes[0].layers[0].backward_ms, 2.0);
  EXPECT_EQ(profile.sizes[0].layers[0].activation_bytes, 10);
  EXPECT_EQ(measured_sizes(profile), (std::vector<int64_t>{1, 4}));
}

TEST(MicroBatchCosts, TheReaderRefusesInconsistentSizes) {
  json doc = sized_doc();
  doc["sizes"][1]["layers"].push_back(doc["sizes"][1]["layers"][0]);
  expect_error(doc, "sizes[1].layers has 2 layers, expected 1 (one per layer)");
  doc = sized_doc();
  std::swap(doc["sizes"][0], doc["sizes"][1]);
  expect_error(doc, "sizes[1].micro_batch_size does not ascend");
  doc = sized_doc();
  doc["sizes"].erase(1);
  expect_error(doc, "lacks the batch_size 4");
  doc = sized_doc();
  doc["sizes"][0]["layers"][0]["forward_ms"] = -1;
  expect_error(doc, "sizes[0].layers[0].forward_ms is -1, expected a finite number >= 0");
  doc = sized_doc();
  doc["sizes"][0]["micro_batch_size"] = 0;
  expect_error(doc, "sizes[0].micro_batch_size is 0, expected 1 to 1099511627776");
  doc = sized_doc();
  doc["sizes"] = 3;
  expect_error(doc, "sizes must be an array, not number");
  // A layer's index says its place; a size the profiler skipped is not one it measured.
  doc = sized_doc();
  doc["sizes"][0]["layers"][0]["index"] = 0;
  doc["skipped_sizes"] = {2};
  EXPECT_EQ(profile_from_json(doc).sizes.size(), 2u);
  doc["sizes"][0]["layers"][0]["index"] = 1;
  expect_error(doc, "sizes[0].layers[0].index is 1, expected 0: layers are listed in model order");
  doc = sized_doc();
  doc["skipped_sizes"] = {2, 4};
  expect_error(doc,
               "skipped_sizes names micro-batch size 4, which sizes measures: a size is measured "
               "or skipped");
  doc["skipped_sizes"] = {0};
  expect_error(doc, "skipped_sizes[0] is 0, expected 1 to");
  // What repeats another field must say the same: a size's chunks, the micro- and mini-batch.
  doc = sized_doc();
  doc["sizes"][0]["chunks"] = 3;
  expect_error(doc,
               "sizes[0].chunks is 3, but 8 samples in 3 chunks are micro-batches of 3, not 1");
  doc = sized_doc();
  doc["sizes"][1]["chunks"] = 0;
  expect_error(doc, "sizes[1].chunks is 0, expected 1 to");
  // The size of the profile's own layers repeats them: an edit of either one is refused, not
  // outvoted by the other.
  doc = sized_doc();
  doc["layers"][0]["forward_ms"] = 1000.0;
  expect_error(doc,
               "sizes[1].layers[0].forward_ms differs from layers[0].forward_ms, the same layer at "
               "the same micro-batch size");
  doc = sized_doc();
  doc["sizes"][1]["layers"][0]["output_bytes"] = 5;
  expect_error(doc, "sizes[1].layers[0].output_bytes differs from layers[0].output_bytes");
  doc = sized_doc();
  doc["sizes"][0]["layers"][0]["forward_ms"] = 1000.0;  // another size: its own measurement
  EXPECT_NO_THROW(profile_from_json(doc));
  doc = sized_doc();
  doc["chunks"] = 0;  // "not said", which a profile of a mini-batch must say
  expect_error(doc,
               "chunks is 0, but input_shape gives a mini-batch of 8 samples: say into how many "
               "micro-batches (1 or more) it was cut");
  doc = sized_doc();
  doc["micro_batch_size"] = 2;
  expect_error(doc, "micro_batch_size is 2, but batch_size (the same size) is 4");
  doc = sized_doc();
  doc["mini_batch_size"] = 16;
  expect_error(doc, "mini_batch_size is 16, but input_shape's batch (the same size) is 8");
  // As the profiler writes them they agree; a micro_batch_size alone says the batch size.
  doc = sized_doc();
  doc["micro_batch_size"] = 4;
  doc["mini_batch_size"] = 8;
  EXPECT_EQ(profile_from_json(doc).batch_size, 4);
  doc.erase("batch_size");
  EXPECT_EQ(profile_from_json(doc).batch_size, 4);
}

}  // namespace
}  // namespace pipebal::balance
