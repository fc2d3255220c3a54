// See engine_overhead.h.
#include "pipebal/profiler/engine_overhead.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>

#include "pipebal/common/cores.h"
#include "pipebal/pipeline/module_layer.h"
#include "pipebal/pipeline/pipeline.h"
#include "pipebal/profiler/keep_default_generator.h"
#include "pipebal/profiler/profiler.h"
#include "pipebal/profiler/statistics.h"

namespace pipebal::profiler {
namespace {

constexpr int kChunks = 8;
constexpr int64_t kWidth = 8;
constexpr int kStepRoundsPerRound = 10;

pipeline::LayerSeq trivial_model(int layers = 1) {
  pipeline::LayerSeq model("engine-calibration");
  for (int l = 0; l < layers; ++l) {
    model.add(
        pipeline::make_layer(fmt::format("fc{}", l), "Linear", torch::nn::Linear(kWidth, kWidth)));
  }
  return model;
}

at::Tensor mse(const at::Tensor& output, const at::Tensor& target) {
  return torch::mse_loss(output, target);
}

pipeline::PipelineOptions with_chunks(pipeline::PipelineOptions options, int chunks) {
  options.chunks = chunks;
  return options;
}

}  // namespace

balance::EngineCost measure_engine_cost(int rounds, std::optional<double> autograd_run_ms,
                                        const std::vector<std::vector<int>>& device_cpus) {
  // The calibration's weights and data draw from the default generator.
  const KeepDefaultGenerator keep;
  rounds = std::max(rounds, 3);
  const at::Tensor input = torch::randn({kChunks, kWidth});
  const at::Tensor target = torch::randn({kChunks, kWidth});
  const pipeline::Batch one(input.narrow(0, 0, 1));
  const pipeline::Batch all(input);

  pipeline::PipelineOptions options;
  options.checkpoint = pipeline::CheckpointMode::kNever;
  // The layers' thread count, within the cores a stage may use: OMP_NUM_THREADS may ask for
  // more than the machine (or its CPU quota) has, which a pipeline refuses.
  options.threads_per_stage = std::min(at::get_num_threads(), usable_cores());
  options.chunks = 1;
  pipeline::PipelineOptions second = options;
  if (!device_cpus.empty()) {
    options.stage_cpus = {device_cpus.front()};
    second.stage_cpus = {device_cpus.front(),
                         device_cpus[std::min<size_t>(1, device_cpus.size() - 1)]};
  }
  pipeline::Pipeline single(trivial_model(), {1}, {}, options);
  pipeline::Pipeline several(trivial_model(), {1}, {}, with_chunks(options, kChunks));
  pipeline::Pipeline one_stage(trivial_model(2), {2}, {}, options);
  pipeline::Pipeline two_stages(trivial_model(2), {1, 1}, {}, second);

  // Steps of a trivial model take a tenth of a millisecond: many rounds cost little, and the
  // differences sought are a few microseconds. Each difference is taken within its round.
  std::vector<double> single_ms, several_ms, second_stage_ms;
  const at::Tensor first_target = target.narrow(0, 0, 1);
  for (int r = -3; r < kStepRoundsPerRound * rounds; ++r) {  // three rounds of warm-up
    const double a = single.step(one, first_target, mse).step_ms;
    const double b = several.step(all, target, mse).step_ms;
    const double c = one_stage.step(one, first_target, mse).step_ms;
    const double d = two_stages.step(one, first_target, mse).step_ms;
    if (r < 0) continue;
    single_ms.push_back(a);
    several_ms.push_back(b);
    second_stage_ms.push_back(d - c);
  }

  ProfileOptions layer_options;
  layer_options.repeat = rounds;
  layer_options.measure_engine = false;
  layer_options.autograd_run_ms = autograd_run_ms;
  layer_options.loss = [first_target](const at::Tensor& output) {
    return mse(output, first_target);
  };
  const Profile layer = profile_model(trivial_model(), one, layer_options);
  const double compute_ms = layer.layers[0].forward_ms + layer.layers[0].backward_ms;

  const double per_micro_batch_ms = (median(several_ms) - median(single_ms)) / (kChunks - 1);
  balance::EngineCost cost;
  cost.action_ms = std::max(0.0, (per_micro_batch_ms - compute_ms) / 2);
  cost.step_ms = std::max(0.0, median(single_ms) - per_micro_batch_ms);
  const double two_messages_ms = median(second_stage_ms) - 2 * cost.action_ms;
  cost.handoff_ms = std::max(0.0, two_messages_ms / 2);
  return cost;
}

}  // namespace pipebal::profiler
