// A stage's backward peaks as the cost model predicts from the profile, in a real pipeline with
// one micro-batch, so that nothing depends on timing (tests/support/stage_peaks.h):
// - a stage that only carries a skip on holds its gradient while its backward runs
//   (carried_bytes) and sends back that very gradient, not a copy;
// - a stage whose peak is inside an inner layer holds what that layer's profiled backward says:
//   the profiler measures each layer's backward as it runs inside a stage, its output and the
//   gradient at it gone once autograd is done with them, and the engine hands a stage's outputs
//   and received gradients over to autograd the same way (pipeline/handed_backward.h).
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "pipebal/pipeline/module_layer.h"
#include "tests/support/skip_model.h"
#include "tests/support/stage_peaks.h"

namespace pipebal::profiler {
namespace {

namespace nn = torch::nn;
using pipeline::testing::PopAdd;
using pipeline::testing::StashLinear;
using testing::measured_stage_peaks;
using testing::one_micro_batch_options;
using testing::quick_cost_profile;

constexpr int64_t kRows = 256;
constexpr int64_t kWidth = 256;  // a tensor: 256 KiB of floats
constexpr int64_t kTensorBytes = kRows * kWidth * 4;

// stash | fc1 fc2 (carrying the skip) | pop head
pipeline::LayerSeq carrying_model() {
  torch::manual_seed(0);
  pipeline::LayerSeq layers("carry");
  auto stash = pipeline::make_layer("stash", "StashLinear", StashLinear("s", kWidth),
                                    pipeline::LayerIO::kBatch);
  stash->set_skips({"s"}, {});
  layers.add(std::move(stash));
  layers.add(pipeline::make_layer("fc1", "Linear", nn::Linear(kWidth, kWidth)));
  layers.add(pipeline::make_layer("fc2", "Linear", nn::Linear(kWidth, kWidth)));
  auto pop = pipeline::make_layer("pop", "PopAdd", PopAdd("s", kWidth), pipeline::LayerIO::kBatch);
  pop->set_skips({}, {"s"});
  layers.add(std::move(pop));
  layers.add(pipeline::make_layer("head", "Linear", nn::Linear(kWidth, kWidth)));
  return layers;
}

// fc0 wide0 narrow0 | wide1 narrow1: each stage's wide layer (x -> 4x wider -> back) has its
// largest backward, which runs once the narrow layer after it is done, that layer's output and
// the gradient at it gone.
pipeline::LayerSeq wide_and_narrow_model() {
  torch::manual_seed(0);
  pipeline::LayerSeq layers("inner");
  layers.add(pipeline::make_layer("fc0", "Linear", nn::Linear(kWidth, kWidth)));
  for (int i = 0; i < 2; ++i) {
    const std::string n = std::to_string(i);
    layers.add(pipeline::make_layer("wide" + n, "Sequential",
                                    nn::Sequential(nn::Linear(kWidth, 4 * kWidth), nn::ReLU(),
                                                   nn::Linear(4 * kWidth, kWidth))));
    layers.add(pipeline::make_layer("narrow" + n, "Linear", nn::Linear(kWidth, kWidth)));
  }
  return layers;
}

TEST(StagePeak, AStageHoldsTheGradientsOfTheSkipsItCarriesAsTheCostModelPredicts) {
  const pipeline::LayerSeq layers = carrying_model();
  const balance::CostProfile profile =
      quick_cost_profile(layers, pipeline::Batch(torch::randn({kRows, kWidth})));
  ASSERT_EQ(profile.layers[1].carried_bytes, kTensorBytes);
  ASSERT_EQ(profile.layers[2].carried_bytes, kTensorBytes);
  const balance::CostModel model(profile.layers, 3, one_micro_batch_options());

  const std::vector<int64_t> measured =
      measured_stage_peaks(layers, {1, 2, 2}, pipeline::Batch(torch::randn({kRows, kWidth})),
                           torch::randn({kRows, kWidth}), /*tag_base=*/60);
  // Without the skip's gradient the prediction would be a tensor short; with a copy of it
  // beside the received one, the stage would hold a tensor more.
  EXPECT_NEAR(static_cast<double>(measured[1]), static_cast<double>(model.memory_bytes(1, 1, 3)),
              kTensorBytes / 8.0);
}

TEST(StagePeak, AStagesBackwardPeaksInsideAnInnerLayerAsTheCostModelPredicts) {
  const pipeline::LayerSeq layers = wide_and_narrow_model();
  const std::vector<int> balance = {3, 2};
  const balance::CostProfile profile =
      quick_cost_profile(layers, pipeline::Batch(torch::randn({kRows, kWidth})));
  const balance::CostModel model(profile.layers, 2, one_micro_batch_options());

  const std::vector<int64_t> measured =
      measured_stage_peaks(layers, balance, pipeline::Batch(torch::randn({kRows, kWidth})),
                           torch::randn({kRows, kWidth}), /*tag_base=*/70);
  // Measured with the output and the gradient at it held through each layer's backward (or a
  // stage holding its output and the gradient it received through its whole backward), the
  // prediction and the run would be one or two tensors apart.
  for (int s = 0, first = 0; s < 2; first += balance[s++]) {
    EXPECT_NEAR(static_cast<double>(measured[s]),
                static_cast<double>(model.memory_bytes(s, first, first + balance[s])),
                kTensorBytes / 8.0)
        << "stage " << s;
  }
}

// Interleaved, a device's stages share its thread: each action's allocations still count as its
// own stage's (PipelineOptions::on_stage_enter), so every stage peaks as the cost model says.
// One micro-batch runs the stages one after another, nothing depending on timing.
TEST(StagePeak, StagesSharingADevicesThreadAreCountedApart) {
  const pipeline::LayerSeq layers = wide_and_narrow_model();
  const std::vector<int> balance = {1, 1, 1, 2};  // fc0 | wide0 | narrow0 | wide1 narrow1
  const balance::CostProfile profile =
      quick_cost_profile(layers, pipeline::Batch(torch::randn({kRows, kWidth})));
  const balance::CostModel model(profile.layers, 4, one_micro_batch_options());

  const std::vector<int64_t> measured =
      measured_stage_peaks(layers, balance, pipeline::Batch(torch::randn({kRows, kWidth})),
                           torch::randn({kRows, kWidth}), /*tag_base=*/80, /*virtual_stages=*/2);
  // Counted under the thread's first stage, stage 2's wide layer would show on stage 0 (and
  // stage 3's on stage 1), each several tensors from its prediction.
  for (int s = 0, first = 0; s < 4; first += balance[s++]) {
    EXPECT_NEAR(static_cast<double>(measured[s]),
                static_cast<double>(model.memory_bytes(s, first, first + balance[s])),
                kTensorBytes / 8.0)
        << "stage " << s;
  }
}

}  // namespace
}  // namespace pipebal::profiler
