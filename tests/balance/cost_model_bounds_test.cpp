// The cost model's input checks, and its arithmetic at the bounds of what it accepts.
#include "pipebal/balance/cost_model.h"

#include <limits>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cost_model_support.h"

namespace pipebal::balance {
namespace {

using pipeline::CheckpointMode;
using pipeline::ScheduleKind;

void expect_rejected(std::vector<LayerCost> layers, int stages, CostOptions options,
                     const std::string& message) {
  try {
    CostModel model(std::move(layers), stages, options);
    FAIL() << "expected std::invalid_argument containing: " << message;
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find(message), std::string::npos) << error.what();
  }
}

TEST(CostModel, RejectsBadInputWithAClearMessage) {
  const CostOptions ok;
  expect_rejected(three_layers(), 0, ok, "stages must be at least 1, got 0");
  expect_rejected(three_layers(), 4, ok, "4 stages need at least 4 layers, the profile has 3");
  expect_rejected({}, 1, ok, "no layers");

  auto nan_layers = three_layers();
  nan_layers[1].forward_ms = std::numeric_limits<double>::quiet_NaN();
  expect_rejected(nan_layers, 1, ok, "layer 1 ('l1'): forward_ms is nan");
  auto negative = three_layers();
  negative[2].backward_ms = -1;
  expect_rejected(negative, 1, ok, "layer 2 ('l2'): backward_ms is -1");
  auto negative_bytes = three_layers();
  negative_bytes[0].activation_bytes = -5;
  expect_rejected(negative_bytes, 1, ok, "layer 0 ('l0'): activation_bytes is -5");

  CostOptions speeds;
  speeds.device_speeds = {1.0, 0.0};
  expect_rejected(three_layers(), 2, speeds,
                  "device 1's speed is 0, expected a relative speed from 1e-6 to 1e6");
  speeds.device_speeds = {1.0, 1.0};
  expect_rejected(three_layers(), 3, speeds, "device speeds: 2 values for 3 stages");
  CostOptions caps;
  caps.memory_caps_bytes = {1, 2};
  expect_rejected(three_layers(), 3, caps, "memory caps: 2 values for 3 stages");
  caps.memory_caps_bytes = {0};
  expect_rejected(three_layers(), 3, caps,
                  "device 0's memory cap is 0 bytes, expected more than 0");
  CostOptions chunks;
  chunks.chunks = 0;
  expect_rejected(three_layers(), 1, chunks, "chunks must be at least 1, got 0");
  CostOptions scale;
  scale.param_scale = -1;
  expect_rejected(three_layers(), 1, scale, "param scale must be from 0 to 1e6, got -1");
  CostOptions bandwidth;
  bandwidth.bandwidth_bytes_per_ms = -3;
  expect_rejected(three_layers(), 1, bandwidth, "bandwidth must be at least 1 byte/s");

  auto huge = three_layers();
  huge[1].param_bytes = kMaxLayerBytes + 1;
  expect_rejected(huge, 1, ok, "layer 1 ('l1'): param_bytes is 4398046511105, expected 0 to");
  auto slow = three_layers();
  slow[0].forward_ms = 1e308;
  expect_rejected(slow, 1, ok, "layer 0 ('l0'): forward_ms is 1e+308");
}

// At the bounds, memory saturates instead of wrapping to a negative count that "fits" any cap.
TEST(CostModel, MemoryAtTheBoundsSaturatesAndFitsNoCap) {
  std::vector<LayerCost> layers(
      1024, LayerCost{"l", "Linear", 1, 1, kMaxLayerBytes, kMaxLayerBytes, kMaxLayerBytes});
  CostOptions options;
  options.chunks = pipeline::kMaxChunks;
  options.checkpoint = pipeline::CheckpointMode::kNever;
  options.param_scale = 1e6;
  const CostModel model(layers, 1, options);
  EXPECT_EQ(model.memory_bytes(0, 0, 1024), kUnlimitedBytes);
  options.memory_caps_bytes = {int64_t{8} << 30};
  const CostModel capped(layers, 2, options);
  EXPECT_GT(capped.memory_bytes(0, 0, 1), capped.memory_cap_bytes(0));
  EXPECT_GT(capped.memory_bytes(1, 1, 1024), 0);
}

// Every stage-layer pair is an entry of the partitioners' tables: a product past the bound is
// refused before they are made (90,000 layers into 90,000 stages took 10 GB, and more crashed).
TEST(CostModel, StagesTimesLayersPastTheTablesBoundAreRefused) {
  const std::vector<LayerCost> layers(kMaxLayers, LayerCost{"l", "Linear", 1, 1, 8, 8, 8});
  const int fitting = static_cast<int>(kMaxStageLayerPairs / static_cast<int64_t>(kMaxLayers));
  EXPECT_NO_THROW(CostModel(layers, fitting, CostOptions{}));
  try {
    CostModel(layers, fitting + 1, CostOptions{});
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& error) {
    EXPECT_EQ(std::string(error.what()),
              fmt::format("262144 layers into {} stages: pipebal balances at most 268435456 "
                          "stage-layer pairs (their product)",
                          fitting + 1));
  }
}

// As many layers as a profile may have, each at the largest size in every field, W's held bytes
// estimated (the activations and kept gradients: twice the bound): the zb-h1 terms, sums of
// per-layer sums, are exact in 64 bits (counted here by hand), and so is the stage's memory.
TEST(CostModel, ZeroBubbleMemoryAtTheLayerBoundsIsExact) {
  constexpr int64_t kB = kMaxLayerBytes;
  LayerCost largest{"l", "Linear", 1, 1, kB, kB, kB};
  largest.kept_grad_bytes = largest.carried_bytes = kB;
  largest.peak_bytes = largest.backward_peak_bytes = largest.weight_peak_bytes = kB;
  const std::vector<LayerCost> layers(kMaxLayers, largest);
  CostOptions options = options_with(ScheduleKind::kZeroBubbleH1, CheckpointMode::kNever, 4);
  options.param_scale = 1;
  const CostModel model(layers, 2, options);
  const int64_t n = static_cast<int64_t>(kMaxLayers);
  // The first stage, all layers but the last: W keeps the activations and the gradient
  // received, and runs its whole backward (each layer's B adds its own and the carried skip's
  // bytes above the activations, less the parameters' gradients made later) keeping every new
  // parameter gradient.
  const StageMemory first = model.memory_terms(0, 0, static_cast<int>(n - 1));
  EXPECT_EQ(first.fixed_bytes, (n - 1) * kB);
  EXPECT_EQ(first.weight_bytes, (n - 1) * kB + kB);
  EXPECT_EQ(first.weight_run_bytes, 2 * kB + (n - 1) * kB);
  // The last stage, the last n - 1 layers: W keeps each layer's activations and kept gradients,
  // and runs layer by layer, the largest W's transient above them.
  const StageMemory last = model.memory_terms(1, 1, static_cast<int>(n));
  EXPECT_EQ(last.weight_bytes, (n - 1) * 2 * kB);
  EXPECT_EQ(last.weight_run_bytes, (n - 1) * 2 * kB + kB);
  EXPECT_GE(model.memory_bytes(1, 1, static_cast<int>(n)),
            last.fixed_bytes + last.weight_run_bytes);
}

}  // namespace
}  // namespace pipebal::balance
