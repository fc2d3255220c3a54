// The cost model against hand-computed stage times, transfers and memory (its input checks and
// bounds: cost_model_bounds_test.cpp).
#include "pipebal/balance/cost_model.h"

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "cost_model_support.h"
#include "pipebal/balance/plan.h"
#include "test_support.h"

namespace pipebal::balance {
namespace {

using pipeline::CheckpointMode;
using pipeline::ScheduleKind;

TEST(CostModel, TimeAddsTheRecomputedShareAndDividesBySpeed) {
  CostOptions options = options_with(ScheduleKind::kGPipe, CheckpointMode::kExceptLast, 4);
  options.device_speeds = {1.0, 0.5};
  const CostModel model(three_layers(), 2, options);
  // Layers 0-1: forward 3, backward 4; 3 of 4 micro-batches recompute: 3 * 1.75 + 4 = 9.25.
  EXPECT_DOUBLE_EQ(model.time_ms(0, 0, 2), 9.25);
  EXPECT_DOUBLE_EQ(model.time_ms(1, 0, 2), 18.5);
  const StageDurations d = model.durations(1, 2, 3);
  EXPECT_DOUBLE_EQ(d.forward_ms, 6);
  EXPECT_DOUBLE_EQ(d.recompute_ms, 6);
  EXPECT_DOUBLE_EQ(d.backward_ms, 4);
}

TEST(CostModel, OneMicroBatchWithExceptLastNeverRecomputes) {
  const CostModel model(three_layers(), 1,
                        options_with(ScheduleKind::kGPipe, CheckpointMode::kExceptLast, 1));
  EXPECT_DOUBLE_EQ(model.time_ms(0, 0, 3), 6 + 6);
}

TEST(CostModel, TransferIsTheBoundaryOutputOverBandwidthAndFreeAfterTheLastLayer) {
  CostOptions options;
  options.bandwidth_bytes_per_ms = 100;
  const CostModel model(three_layers(), 2, options);
  EXPECT_DOUBLE_EQ(model.transfer_ms(1), 10);  // output of layer 0: 1000 bytes
  EXPECT_DOUBLE_EQ(model.transfer_ms(2), 20);
  EXPECT_DOUBLE_EQ(model.transfer_ms(3), 0);
  EXPECT_DOUBLE_EQ(model.cost_ms(0, 0, 2), model.time_ms(0, 0, 2) + 20);
  EXPECT_DOUBLE_EQ(CostModel(three_layers(), 2, CostOptions{}).transfer_ms(1), 0);
}

TEST(CostModel, AllReduceIsARingOverTheReplicasSpreadOverTheMicroBatches) {
  CostOptions options;
  options.chunks = 4;
  options.replicas = 4;
  options.allreduce_bytes_per_ms = 3;
  const CostModel model(three_layers(), 2, options);
  // Layers 0-1 hold 200 parameter bytes: a ring moves 2 * 3/4 of them, at 3 bytes/ms.
  EXPECT_DOUBLE_EQ(model.allreduce_ms(0, 2), 2 * 0.75 * 200 / 3);
  EXPECT_DOUBLE_EQ(model.cost_ms(0, 0, 2), model.time_ms(0, 0, 2) + 100.0 / 4);
  options.replicas = 1;  // nothing to average
  EXPECT_DOUBLE_EQ(CostModel(three_layers(), 2, options).allreduce_ms(0, 2), 0);
  options.replicas = 0;
  EXPECT_THROW(CostModel(three_layers(), 2, options), std::invalid_argument);
  options.replicas = 2;
  options.allreduce_bytes_per_ms = -1;
  EXPECT_THROW(CostModel(three_layers(), 2, options), std::invalid_argument);
}

TEST(CostModel, EngineCostsAddToEveryActionAndOnceToTheStep) {
  CostOptions options = options_with(ScheduleKind::kGPipe, CheckpointMode::kAlways, 4);
  options.device_speeds = {0.5};  // the engine's host time does not scale with the device
  options.engine = {0.3, 0.1};
  const CostModel model(three_layers(), 1, options);
  const StageDurations d = model.durations(0, 0, 3);
  EXPECT_DOUBLE_EQ(d.forward_ms, 12 + 0.1);
  EXPECT_DOUBLE_EQ(d.recompute_ms, 12 + 0.1);
  EXPECT_DOUBLE_EQ(d.backward_ms, 12 + 0.1);
  EXPECT_DOUBLE_EQ(d.weight_ms, 0);
  // Half-size micro-batches halve the compute, not the engine's part.
  EXPECT_DOUBLE_EQ(model.durations(0, 0, 3, 0.5).forward_ms, 6 + 0.1);
  // time_ms stays the compute alone (additive over layers); cost_ms adds F, R and B's share.
  EXPECT_DOUBLE_EQ(model.time_ms(0, 0, 3), 36);
  EXPECT_DOUBLE_EQ(model.overhead_ms(0), 3 * 0.1);
  EXPECT_DOUBLE_EQ(model.cost_ms(0, 0, 3), 36 + 0.3);
  // One stage runs its 12 actions back to back, then the step's fixed cost.
  EXPECT_DOUBLE_EQ(simulate_balance(model, {3}, 4).step_ms, 4 * (3 * 12.1) + 0.3);

  // zb-h1 splits the backward: W is an action of its own. The first stage has no input gradient
  // to compute: its B is the action alone, its W the whole backward.
  std::vector<LayerCost> layers = three_layers();
  for (auto& layer : layers) layer.weight_ms = 0.5;
  CostOptions zb = options_with(ScheduleKind::kZeroBubbleH1, CheckpointMode::kNever, 4);
  zb.engine = {0, 0.1};
  const CostModel split(layers, 2, zb);
  const StageDurations first = split.durations(0, 0, 2);
  EXPECT_DOUBLE_EQ(first.backward_ms, 0.1);
  EXPECT_DOUBLE_EQ(first.weight_ms, 4 + 0.1);
  const StageDurations later = split.durations(1, 2, 3);
  EXPECT_DOUBLE_EQ(later.backward_ms, 2 - 0.5 + 0.1);
  EXPECT_DOUBLE_EQ(later.weight_ms, 0.5 + 0.1);
  EXPECT_DOUBLE_EQ(split.overhead_ms(0), 3 * 0.1);
  // B as profiled apart, when it was: B + W may exceed the backward whole. The first stage's B
  // stays the action alone; time_ms (the balancer's additive cost) keeps the backward whole.
  for (auto& layer : layers) layer.input_grad_ms = 1.8;
  const CostModel measured(layers, 2, zb);
  EXPECT_DOUBLE_EQ(measured.durations(1, 2, 3).backward_ms, 1.8 + 0.1);
  EXPECT_DOUBLE_EQ(measured.durations(1, 2, 3).weight_ms, 0.5 + 0.1);
  EXPECT_DOUBLE_EQ(measured.durations(1, 1, 3, 0.5).backward_ms, 2 * 1.8 * 0.5 + 0.1);
  EXPECT_DOUBLE_EQ(measured.durations(0, 0, 2).backward_ms, 0.1);
  EXPECT_DOUBLE_EQ(measured.time_ms(1, 2, 3), split.time_ms(1, 2, 3));
  layers[0].input_grad_ms = -2;
  EXPECT_THROW(CostModel(layers, 2, zb), std::invalid_argument);

  options.engine = {-1, 0};
  EXPECT_THROW(CostModel(three_layers(), 1, options), std::invalid_argument);
  options.engine = {0, std::numeric_limits<double>::quiet_NaN()};
  EXPECT_THROW(CostModel(three_layers(), 1, options), std::invalid_argument);
}

// Every message between stages costs the engine's hand-off to the receiving thread, or the link's
// latency where that is larger (a measured link's, taken through the engine, includes it). One
// micro-batch through two stages has two on its critical path: the output and its gradient.
TEST(CostModel, EveryMessageCostsTheEnginesHandOffAtLeast) {
  CostOptions options = options_with(ScheduleKind::kGPipe, CheckpointMode::kNever, 1);
  const CostModel free(three_layers(), 2, options);
  options.engine.handoff_ms = 0.25;
  const CostModel handed(three_layers(), 2, options);
  EXPECT_DOUBLE_EQ(handed.message_latency_ms(), 0.25);
  EXPECT_DOUBLE_EQ(handed.transfer_ms(1), free.transfer_ms(1) + 0.25);
  EXPECT_DOUBLE_EQ(handed.transfer_ms(3), 0);  // after the last layer, no message
  EXPECT_DOUBLE_EQ(simulate_balance(handed, {1, 2}, 1).step_ms,
                   simulate_balance(free, {1, 2}, 1).step_ms + 2 * 0.25);
  // One stage sends nothing.
  EXPECT_DOUBLE_EQ(
      simulate_balance(CostModel(three_layers(), 1, options), {3}, 1).step_ms,
      simulate_balance(CostModel(three_layers(), 1,
                                 options_with(ScheduleKind::kGPipe, CheckpointMode::kNever, 1)),
                       {3}, 1)
          .step_ms);

  options.latency_ms = 0.5;
  const CostModel linked(three_layers(), 2, options);
  EXPECT_DOUBLE_EQ(linked.message_latency_ms(), 0.5);
  EXPECT_DOUBLE_EQ(simulate_balance(linked, {1, 2}, 1).step_ms,
                   simulate_balance(free, {1, 2}, 1).step_ms + 2 * 0.5);

  options.engine.handoff_ms = -1;
  EXPECT_THROW(CostModel(three_layers(), 2, options), std::invalid_argument);
}

TEST(CostModel, GPipeKeepsEveryMicroBatch) {
  // Stage 1 holds layers 1-2: params 200 * 2, input 1000 (output of layer 0), activations 20.
  // Every micro-batch keeps the input it took until its backward.
  const auto never =
      CostModel(three_layers(), 2, options_with(ScheduleKind::kGPipe, CheckpointMode::kNever, 4));
  EXPECT_EQ(never.memory_bytes(1, 1, 3), 400 + 4 * (1000 + 20));
  const auto always =
      CostModel(three_layers(), 2, options_with(ScheduleKind::kGPipe, CheckpointMode::kAlways, 4));
  EXPECT_EQ(always.memory_bytes(1, 1, 3), 400 + 4 * 1000 + 20);  // + one recomputation
  // except_last: 4 inputs and the last micro-batch's activations, which are freed before the
  // first recomputation adds another micro-batch's.
  const auto except_last = CostModel(
      three_layers(), 2, options_with(ScheduleKind::kGPipe, CheckpointMode::kExceptLast, 4));
  EXPECT_EQ(except_last.memory_bytes(1, 1, 3), 400 + 4 * 1000 + 20);
}

// A B allocates on its way back what its layers' measured peaks add to their activations
// (here the peak over forward and backward, as profiles had before the backward's own), less the
// activations of the later layers, freed by then: stage 1 holds layers 1-2 (activations 10
// each); layer 2's B peaks 115 above what it holds, layer 1's 140 - 10 = 130 (layer 2's are gone).
TEST(CostModel, ABackwardPeaksAboveWhatItsMicroBatchHolds) {
  std::vector<LayerCost> layers = three_layers();
  layers[1].peak_bytes = 150;
  layers[2].peak_bytes = 125;
  const auto options = options_with(ScheduleKind::kGPipe, CheckpointMode::kNever, 4);
  const CostModel model(layers, 2, options);
  EXPECT_EQ(model.memory_terms(1, 1, 3).backward_bytes, 130);
  EXPECT_EQ(model.memory_bytes(1, 1, 3), 400 + 4 * (1000 + 20) + 130);
  EXPECT_EQ(model.memory_terms(1, 2, 3).backward_bytes, 115);
  layers[1].peak_bytes = 120;  // 110 above, less than what layer 2 frees: layer 2 decides
  EXPECT_EQ(CostModel(layers, 2, options).memory_terms(1, 1, 3).backward_bytes, 115);
  layers[1].peak_bytes = layers[2].peak_bytes = 0;  // not measured
  EXPECT_EQ(CostModel(layers, 2, options).memory_terms(1, 1, 3).backward_bytes, 0);
  // A checkpointed stage's B comes after its recomputation: 4 inputs, one micro-batch's
  // activations and the B's own peak.
  layers[1].peak_bytes = 150;
  const CostModel always(layers, 2, options_with(ScheduleKind::kGPipe, CheckpointMode::kAlways, 4));
  EXPECT_EQ(always.memory_bytes(1, 1, 3), 400 + 4 * 1000 + 20 + 130);
}

// The backward's own measured peak, where the profile has it, stands for what the B adds above
// the activations (its parameters' new gradients included, made before they are added to the
// held ones) instead of the layer's peak over forward and backward together, which a forward's
// transients inflate.
TEST(CostModel, TheBackwardsOwnPeakReplacesTheLayersPeak) {
  std::vector<LayerCost> layers = three_layers();
  layers[1].peak_bytes = 500;  // its activations, a backward of 125 and a forward transient
  layers[2].peak_bytes = 125;
  const auto options = options_with(ScheduleKind::kGPipe, CheckpointMode::kNever, 4);
  EXPECT_EQ(CostModel(layers, 2, options).memory_terms(1, 1, 3).backward_bytes, 480);
  layers[1].backward_peak_bytes = 125;
  layers[2].backward_peak_bytes = 103;
  const CostModel model(layers, 2, options);
  // Layer 1's B holds its own activations (10) and adds 125, layer 2's all 20 and adds 103.
  EXPECT_EQ(model.memory_terms(1, 1, 3).backward_bytes, 115);
  EXPECT_EQ(model.memory_bytes(1, 1, 3), 400 + 4 * (1000 + 20) + 115);
  EXPECT_EQ(model.memory_terms(1, 2, 3).backward_bytes, 103);
  layers[1].backward_peak_bytes =
      90;  // less than layer 2's, which also holds layer 2's activations
  EXPECT_EQ(CostModel(layers, 2, options).memory_terms(1, 1, 3).backward_bytes, 103);
  layers[1].backward_peak_bytes = -2;
  EXPECT_THROW(CostModel(layers, 2, options), std::invalid_argument);
}

// Stage 0 holds its micro-batches of the model's input as the other stages hold theirs, when
// the profile measured it; a stage's input is otherwise the previous layer's output.
TEST(CostModel, AStageHoldsTheInputItTook) {
  std::vector<LayerCost> layers = three_layers();
  const auto options = options_with(ScheduleKind::kGPipe, CheckpointMode::kAlways, 4);
  const CostModel unmeasured(layers, 2, options);
  EXPECT_EQ(unmeasured.memory_bytes(0, 0, 1), 200 + 0 + 10);
  EXPECT_EQ(unmeasured.memory_terms(0, 0, 1).input_bytes, 0);
  EXPECT_EQ(unmeasured.memory_terms(1, 1, 3).input_bytes, 1000);
  layers[0].input_bytes = 300;
  layers[1].input_bytes = 1000;
  const CostModel measured(layers, 2, options);
  EXPECT_EQ(measured.memory_terms(0, 0, 1).input_bytes, 300);
  EXPECT_EQ(measured.memory_bytes(0, 0, 1), 200 + 4 * 300 + 10);  // 4 inputs, one recomputation
  EXPECT_EQ(measured.memory_terms(1, 1, 3).input_bytes, 1000);
  layers[0].input_bytes = -5;
  EXPECT_THROW(CostModel(layers, 2, options), std::invalid_argument);
}

// A stage sends forward what the next stage takes as its input and back its own input's
// gradient; the first stage sends no gradient, the last no output.
TEST(CostModel, AStageSendsTheNextStagesInputAndItsOwnInputsGradient) {
  std::vector<LayerCost> layers = three_layers();
  const auto options = options_with(ScheduleKind::kOneFOneB, CheckpointMode::kNever, 4);
  const CostModel unmeasured(layers, 2, options);
  EXPECT_EQ(unmeasured.memory_terms(0, 0, 1).output_bytes, 1000);
  EXPECT_EQ(unmeasured.memory_terms(0, 0, 1).input_grad_bytes, 0);
  EXPECT_EQ(unmeasured.memory_terms(1, 1, 3).output_bytes, 0);
  EXPECT_EQ(unmeasured.memory_terms(1, 1, 3).input_grad_bytes, 1000);
  layers[1].input_bytes = 1500;  // e.g. skip tensors travelling with the output
  const CostModel measured(layers, 2, options);
  EXPECT_EQ(measured.memory_terms(0, 0, 1).output_bytes, 1500);
  EXPECT_EQ(measured.memory_terms(1, 1, 3).input_grad_bytes, 1500);
}

// A tensor given twice (the main input and a skip sharing its storage) is held once but has two
// gradients: a stage sends back one per input tensor.
TEST(CostModel, AStageSendsAGradientForEachTensorOfItsInput) {
  std::vector<LayerCost> layers = three_layers();
  layers[1].input_bytes = 1000;
  layers[1].input_grad_bytes = 2000;
  const auto options = options_with(ScheduleKind::kOneFOneB, CheckpointMode::kNever, 4);
  const CostModel model(layers, 2, options);
  EXPECT_EQ(model.memory_terms(1, 1, 3).input_bytes, 1000);
  EXPECT_EQ(model.memory_terms(1, 1, 3).input_grad_bytes, 2000);
  EXPECT_EQ(model.memory_terms(0, 0, 1).input_grad_bytes, 0);  // the model's input: none
  layers[1].input_grad_bytes = -2;
  EXPECT_THROW(CostModel(layers, 2, options), std::invalid_argument);
}

// While a layer's B runs, the gradients of the skips it only carries are alive too (made by the
// later layer that took them, or received from the next stage, and kept for the layer that made
// them, or sent back), which its own measured peak never saw. Three layers of 10 activation
// bytes; layer 0 carries 50 bytes of skips, layer 1 30.
TEST(CostModel, ABackwardHoldsTheGradientsOfTheSkipsItsLayerCarries) {
  std::vector<LayerCost> layers = three_layers();
  layers[0].carried_bytes = 50;
  layers[1].carried_bytes = 30;
  const auto options = options_with(ScheduleKind::kGPipe, CheckpointMode::kNever, 4);
  const CostModel model(layers, 2, options);
  EXPECT_EQ(model.memory_terms(0, 0, 1).backward_bytes, 50);
  EXPECT_EQ(model.memory_bytes(0, 0, 1), 200 + 4 * 10 + 50);
  // Layer 0's B, with layer 1's activations gone: 10 + 50 above the 20 the stage holds.
  EXPECT_EQ(model.memory_terms(0, 0, 2).backward_bytes, 40);
  EXPECT_EQ(model.memory_terms(0, 1, 2).backward_bytes, 30);
  EXPECT_EQ(model.memory_terms(1, 1, 3).backward_bytes, 20);  // layer 1's 10 + 30 above 20
  layers[1].backward_peak_bytes = 15;                         // on top of its measured B peak
  layers[0].backward_peak_bytes = 0;
  EXPECT_EQ(CostModel(layers, 2, options).memory_terms(0, 0, 2).backward_bytes, 20 + 15 + 30 - 20);
  layers[1].carried_bytes = -1;
  EXPECT_THROW(CostModel(layers, 2, options), std::invalid_argument);
}

TEST(CostModel, OneFOneBKeepsStagesMinusStageMicroBatches) {
  std::vector<LayerCost> layers(4);
  for (auto& l : layers) {
    l.activation_bytes = 10;
    l.output_bytes = 1000;
  }
  const auto never =
      CostModel(layers, 4, options_with(ScheduleKind::kOneFOneB, CheckpointMode::kNever, 8));
  for (int s = 0; s < 4; ++s) {
    const int input = s == 0 ? 0 : 1000;  // stage 0's input is the data loader's
    EXPECT_EQ(never.memory_bytes(s, s, s + 1), (4 - s) * (input + 10)) << s;
  }
  const auto always =
      CostModel(layers, 4, options_with(ScheduleKind::kOneFOneB, CheckpointMode::kAlways, 8));
  for (int s = 1; s < 4; ++s) {
    EXPECT_EQ(always.memory_bytes(s, s, s + 1), (4 - s) * 1000 + 10) << s;
  }
}

// zb-h1 holds a micro-batch's activations from F to B and then, until its W, what W needs, and
// its input (2000 bytes) from F to W: stage 1 holding layer 2 with W delays 0 and 1 (chunks 3:
// F0 B0 F1 B1 W0 F2 B2 W1 W2).
TEST(CostModel, ZeroBubbleHoldsWhatWNeedsFromBToItsDelayedW) {
  std::vector<LayerCost> layers = three_layers();
  layers[2].weight_held_bytes = 12;
  CostOptions options = options_with(ScheduleKind::kZeroBubbleH1, CheckpointMode::kNever, 3);
  options.weight_delays = {0, 0};
  EXPECT_EQ(CostModel(layers, 2, options).memory_bytes(1, 2, 3), 200 + 2000 + 12);
  options.weight_delays = {0, 1};
  // After B1: two micro-batches wait for their W.
  EXPECT_EQ(CostModel(layers, 2, options).memory_bytes(1, 2, 3), 200 + 2 * (2000 + 12));
  layers[2].weight_held_bytes = 4;  // after F1: one waits for W, one holds its activations
  EXPECT_EQ(CostModel(layers, 2, options).memory_bytes(1, 2, 3), 200 + 2 * 2000 + 10 + 4);
  layers[2].weight_held_bytes = -1;  // not measured: the activations and the kept gradients
  layers[2].kept_grad_bytes = 5;
  EXPECT_EQ(CostModel(layers, 2, options).memory_bytes(1, 2, 3), 200 + 2 * (2000 + 15));
  EXPECT_EQ(CostModel(layers, 2, options).memory_terms(1, 2, 3).weight_bytes, 15);
}

// What a layer holds for W counts its output; a stage that ends with it has sent the output and
// holds none of it from B to W, unless the layer's own graph keeps it (released_output_bytes
// says how much it does not). A layer inside the stage keeps counting it (the next layer's input).
TEST(CostModel, AStagesLastLayerHoldsNoneOfTheOutputItSentForW) {
  std::vector<LayerCost> layers = three_layers();
  for (LayerCost& layer : layers) {
    layer.weight_held_bytes = 50;
    layer.released_output_bytes = 30;
  }
  CostOptions options = options_with(ScheduleKind::kZeroBubbleH1, CheckpointMode::kNever, 3);
  options.weight_delays = {0, 0};
  const CostModel model(layers, 2, options);
  EXPECT_EQ(model.memory_terms(1, 1, 3).weight_bytes, 50 + 50 - 30);
  EXPECT_EQ(model.memory_terms(1, 1, 2).weight_bytes, 50 - 30);
  // The first stage, whose B walks nothing, holds its activations and the gradient it received.
  EXPECT_EQ(model.memory_terms(0, 0, 2).weight_bytes, 20 + 2000);
  // Never more released than held, so that the stage's memory still grows with its end.
  layers[1].released_output_bytes = 80;
  EXPECT_EQ(CostModel(layers, 2, options).memory_terms(1, 1, 2).weight_bytes, 0);
}

// zb-h1's first stage has no input gradient to compute: from B to W it holds its activations
// (layers 0-1: 20 bytes) and the gradient it received (of layer 1's output: 2000), whatever the
// layers measured as held for their own W (which they measured with an input gradient to make).
// Its W is its whole backward, in one run that walks down those and makes every new parameter
// gradient (200 bytes) before adding them to the held ones. With W delays 0 and 3 micro-batches
// stage 0 runs F0 F1 B0 W0 F2 B1 W1 B2 W2: during W0 it also holds F1's activations (20).
TEST(CostModel, TheFirstStagesWMakesEveryParameterGradientAtOnce) {
  CostOptions options = options_with(ScheduleKind::kZeroBubbleH1, CheckpointMode::kNever, 3);
  options.weight_delays = {0, 0};
  std::vector<LayerCost> layers = three_layers();
  for (LayerCost& layer : layers) layer.weight_held_bytes = 5000;
  const CostModel model(layers, 2, options);
  EXPECT_EQ(model.memory_terms(0, 0, 2).weight_bytes, 20 + 2000);
  EXPECT_EQ(model.memory_terms(0, 0, 2).weight_run_bytes, 20 + 2000 + 200);
  EXPECT_EQ(model.memory_bytes(0, 0, 2), 400 + 20 + 2220);
  // A measured gradient of the next stage's input counts as measured (its skips' included).
  layers[2].input_grad_bytes = 3000;
  EXPECT_EQ(CostModel(layers, 2, options).memory_terms(0, 0, 2).weight_bytes, 20 + 3000);
  // Ending where a smaller gradient comes back, the stage never holds less than ending earlier
  // (the partitioners need it): at layer 1 it held 10 + 1000.
  layers[1].input_grad_bytes = 5;
  EXPECT_EQ(CostModel(layers, 2, options).memory_terms(0, 0, 1).weight_bytes, 10 + 5);
  layers[1].input_grad_bytes = 1500;
  EXPECT_EQ(CostModel(layers, 2, options).memory_terms(0, 0, 1).weight_bytes, 10 + 1500);
  layers[2].input_grad_bytes = 0;
  EXPECT_EQ(CostModel(layers, 2, options).memory_terms(0, 0, 2).weight_bytes, 10 + 1500);
  // Later stages' Ws add layer by layer: they hold what they held for W.
  const StageMemory later = model.memory_terms(1, 2, 3);
  EXPECT_EQ(later.weight_run_bytes, later.weight_bytes);
  // A measured W transient is in the whole backward's walk already.
  layers = three_layers();
  for (LayerCost& layer : layers) layer.weight_peak_bytes = 7;
  EXPECT_EQ(CostModel(layers, 2, options).memory_terms(0, 0, 2).weight_run_bytes, 20 + 2000 + 200);
  options.schedule = ScheduleKind::kOneFOneB;  // a whole backward adds as it goes
  options.weight_delays.clear();
  EXPECT_EQ(CostModel(three_layers(), 2, options).memory_terms(0, 0, 2).weight_run_bytes, 0);
}

// With the backward's peaks measured, the first stage's W walks down as a B does, freeing each
// layer's activations once past it, and keeps every new parameter gradient until its end. Layer
// 0's backward adds 150 (its own new gradients, 100, included), layer 1's 130: at layer 1 the W
// holds both layers' activations and 130 (150), at layer 0 layer 0's activations, its 150 and
// layer 1's kept gradients (260). Making every gradient at the peak of the walk would say 360.
TEST(CostModel, TheFirstStagesWKeepsEachNewGradientAsItWalksDown) {
  std::vector<LayerCost> layers = three_layers();
  layers[0].backward_peak_bytes = 150;
  layers[1].backward_peak_bytes = 130;
  layers[2].backward_peak_bytes = 130;
  CostOptions options = options_with(ScheduleKind::kZeroBubbleH1, CheckpointMode::kNever, 3);
  options.weight_delays = {0, 0};
  const CostModel model(layers, 2, options);
  EXPECT_EQ(model.memory_terms(0, 0, 2).weight_run_bytes, 10 + 150 + 100);
  EXPECT_EQ(model.memory_terms(0, 0, 1).weight_run_bytes, 10 + 150);
  layers[1].backward_peak_bytes = 400;  // now layer 1's backward is the larger
  EXPECT_EQ(CostModel(layers, 2, options).memory_terms(0, 0, 2).weight_run_bytes, 20 + 400);
}

// A later stage's W runs layer by layer while the stage holds all it kept for W: it peaks at
// that plus the largest of its layers' W transients (each layer's new parameter gradients and
// workspace, freed before the next layer's). Stage 1 holds layers 1-2 (W delay 0, chunks 3:
// F0 B0 W0 F1 B1 W1 F2 B2 W2) and its input, layer 0's output (1000 bytes).
TEST(CostModel, ALaterStagesWPeaksAtItsLargestLayersWTransient) {
  std::vector<LayerCost> layers = three_layers();
  layers[1].weight_held_bytes = 12;
  layers[2].weight_held_bytes = 12;
  layers[1].weight_peak_bytes = 7;
  layers[2].weight_peak_bytes = 30;
  CostOptions options = options_with(ScheduleKind::kZeroBubbleH1, CheckpointMode::kNever, 3);
  options.weight_delays = {0, 0};
  const CostModel model(layers, 2, options);
  EXPECT_EQ(model.memory_terms(1, 1, 3).weight_run_bytes, 24 + 30);
  EXPECT_EQ(model.memory_bytes(1, 1, 3), 400 + 1000 + 24 + 30);
  EXPECT_EQ(model.memory_terms(1, 1, 2).weight_run_bytes, 12 + 7);
  // Unsplit schedules have no W: the transients count nowhere.
  options.schedule = ScheduleKind::kOneFOneB;
  options.weight_delays.clear();
  EXPECT_EQ(CostModel(layers, 2, options).memory_bytes(1, 1, 3), 400 + 1000 + 20);
}

// The partitioners' searches over a stage's end rely on its memory never shrinking as the stage
// grows, for every schedule and checkpoint mode, with measured peaks and W-held bytes or without.
TEST(CostModel, AStagesMemoryNeverShrinksAsItGrows) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 40; ++trial) {
    const std::vector<LayerCost> layers = testing::random_layers(rng, 9, /*integer_costs=*/false);
    for (const ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB,
                                    ScheduleKind::kInterleaved, ScheduleKind::kZeroBubbleH1}) {
      for (const CheckpointMode mode :
           {CheckpointMode::kNever, CheckpointMode::kExceptLast, CheckpointMode::kAlways}) {
        CostOptions options = options_with(kind, mode, 4);
        if (kind == ScheduleKind::kInterleaved) options.virtual_stages = 2;
        const CostModel model(layers, 4, options);
        for (int s = 0; s < 4; ++s) {
          for (int first = 0; first < 9; ++first) {
            for (int end = first + 1; end < 9; ++end) {
              ASSERT_LE(model.memory_bytes(s, first, end), model.memory_bytes(s, first, end + 1))
                  << "trial " << trial << ", " << pipeline::to_string(kind) << ", "
                  << pipeline::to_string(mode) << ", stage " << s << ", layers " << first << "-"
                  << end;
            }
          }
        }
      }
    }
  }
}

TEST(CostModel, ParamScaleMultipliesParameters) {
  CostOptions options = options_with(ScheduleKind::kGPipe, CheckpointMode::kNever, 1);
  options.param_scale = 4;
  EXPECT_EQ(CostModel(three_layers(), 1, options).memory_bytes(0, 0, 3), 1200 + 30);
}

TEST(CostModel, OneCapOrSpeedAppliesToEveryStage) {
  CostOptions options;
  options.memory_caps_bytes = {4096};
  options.device_speeds = {2.0};
  const CostModel model(three_layers(), 3, options);
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(model.memory_cap_bytes(s), 4096);
    EXPECT_EQ(model.speed(s), 2.0);
  }
  EXPECT_EQ(CostModel(three_layers(), 3, CostOptions{}).memory_cap_bytes(1), kUnlimitedBytes);
}

}  // namespace
}  // namespace pipebal::balance
