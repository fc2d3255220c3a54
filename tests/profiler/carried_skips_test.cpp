// A stage that only carries a skip on holds its gradient while its backward runs, as the cost
// model predicts from the profile's carried_bytes, and sends back that very gradient (no copy).
// One micro-batch, so that nothing depends on timing: the middle stage's peak is its backward's.
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
#include "tests/support/skip_model.h"

namespace pipebal::profiler {
namespace {

namespace nn = torch::nn;
using pipeline::testing::PopAdd;
using pipeline::testing::StashLinear;

constexpr int64_t kRows = 256;
constexpr int64_t kWidth = 256;  // a tensor: 256 KiB of floats
constexpr int64_t kTensorBytes = kRows * kWidth * 4;
constexpr int kTagBase = 60;

at::Tensor mse(const at::Tensor& out, const at::Tensor& target) {
  return torch::mse_loss(out, target);
}

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

TEST(CarriedSkips, AStageHoldsTheirGradientsAsTheCostModelPredicts) {
  pipeline::LayerSeq layers = carrying_model();
  const std::vector<int> balance = {1, 2, 2};

  ProfileOptions profiling;
  profiling.repeat = 2;
  profiling.warmup = 1;
  profiling.measure_engine = false;
  const balance::CostProfile profile = cost_profile(
      profile_model(layers, pipeline::Batch(torch::randn({kRows, kWidth})), profiling));
  ASSERT_EQ(profile.layers[1].carried_bytes, kTensorBytes);
  ASSERT_EQ(profile.layers[2].carried_bytes, kTensorBytes);
  // The parameters were made before counting began: only their gradients count.
  balance::CostOptions options;
  options.chunks = 1;
  options.schedule = pipeline::ScheduleKind::kGPipe;
  options.checkpoint = pipeline::CheckpointMode::kNever;
  options.param_scale = 1;
  const balance::CostModel model(profile.layers, 3, options);
  const int64_t predicted = model.memory_bytes(1, 1, 3);

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
  const int64_t measured = scope.peak_bytes(kTagBase + 1);
  // Without the skip's gradient the prediction would be a tensor short; with a copy of it
  // beside the received one, the stage would hold a tensor more.
  EXPECT_NEAR(static_cast<double>(measured), static_cast<double>(predicted), kTensorBytes / 8.0);
}

}  // namespace
}  // namespace pipebal::profiler
