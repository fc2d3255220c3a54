// A stage whose backward peaks inside one of its inner layers holds what the cost model predicts
// from the profile: the profiler measures each layer's backward as it runs inside a stage (its
// output and the gradient at it gone once autograd is done with them), and the engine hands a
// stage's outputs and received gradients over to autograd the same way. One micro-batch, so
// that nothing depends on timing: each stage's peak is its backward's.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "balance/cost_model.h"
#include "pipeline/module_layer.h"
#include "pipeline/pipeline.h"
#include "pipeline/transport.h"
#include "profiler/cpu_memory.h"
#include "profiler/profile_json.h"
#include "profiler/profiler.h"
#include "profiler/taken_batch.h"

namespace pipebal::profiler {
namespace {

namespace nn = torch::nn;

constexpr int64_t kRows = 256;
constexpr int64_t kWidth = 256;  // a tensor: 256 KiB of floats
constexpr int64_t kTensorBytes = kRows * kWidth * 4;
constexpr int kTagBase = 70;

at::Tensor mse(const at::Tensor& out, const at::Tensor& target) {
  return torch::mse_loss(out, target);
}

// fc0 fc1 | wide (x -> 4 wide -> back, its backward the largest) narrow | wide narrow: each stage
// peaks in its first layer's backward, with the next layer's output and gradient gone by then.
pipeline::LayerSeq model() {
  torch::manual_seed(0);
  pipeline::LayerSeq layers("inner");
  layers.add(pipeline::make_layer("fc0", "Linear", nn::Linear(kWidth, kWidth)));
  for (int s = 0; s < 2; ++s) {
    layers.add(pipeline::make_layer("wide" + std::to_string(s), "Sequential",
                                    nn::Sequential(nn::Linear(kWidth, 4 * kWidth), nn::ReLU(),
                                                   nn::Linear(4 * kWidth, kWidth))));
    layers.add(
        pipeline::make_layer("narrow" + std::to_string(s), "Linear", nn::Linear(kWidth, kWidth)));
  }
  return layers;
}

TEST(InnerPeak, AStagesBackwardPeaksInsideAnInnerLayerAsTheCostModelPredicts) {
  pipeline::LayerSeq layers = model();
  const std::vector<int> balance = {3, 2};

  ProfileOptions profiling;
  profiling.repeat = 2;
  profiling.warmup = 1;
  profiling.measure_engine = false;
  const balance::CostProfile profile = cost_profile(
      profile_model(layers, pipeline::Batch(torch::randn({kRows, kWidth})), profiling));
  // The parameters were made before counting began: only their gradients count.
  balance::CostOptions options;
  options.chunks = 1;
  options.schedule = pipeline::ScheduleKind::kGPipe;
  options.checkpoint = pipeline::CheckpointMode::kNever;
  options.param_scale = 1;
  const balance::CostModel cost(profile.layers, 2, options);

  // The measurement: the second step (the first makes the gradients), each stage's allocations
  // under its tag, a message taken the taker's.
  CpuMemoryScope scope;
  pipeline::PipelineOptions engine;
  engine.chunks = 1;
  engine.schedule = pipeline::ScheduleKind::kGPipe;
  engine.checkpoint = pipeline::CheckpointMode::kNever;
  engine.on_worker_start = [](int stage) { CpuMemoryScope::set_thread_tag(kTagBase + stage); };
  pipeline::Pipeline pipeline(layers, balance, {}, engine,
                              pipeline::in_process_transport(count_as_taken));
  const pipeline::Batch input(torch::randn({kRows, kWidth}));
  const at::Tensor target = torch::randn({kRows, kWidth});
  for (int step = 0; step < 2; ++step) {
    scope.reset_peak();
    pipeline.step(input, target, mse);
  }
  // Measured with the output and the gradient at it held through each layer's backward (or a
  // stage holding its output and the gradient it received through its whole backward), the
  // prediction and the run would be tensors apart.
  for (int s = 0; s < 2; ++s) {
    const int first = s == 0 ? 0 : balance[0];
    const int64_t predicted = cost.memory_bytes(s, first, first + balance[s]);
    EXPECT_NEAR(static_cast<double>(scope.peak_bytes(kTagBase + s)), static_cast<double>(predicted),
                kTensorBytes / 8.0)
        << "stage " << s;
  }
}

}  // namespace
}  // namespace pipebal::profiler
