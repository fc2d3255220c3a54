// See engine_overhead.h.
#include "profiler/engine_overhead.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "pipeline/module_layer.h"
#include "pipeline/pipeline.h"
#include "profiler/profiler.h"
#include "profiler/statistics.h"

namespace pipebal::profiler {
namespace {

constexpr int kChunks = 8;
constexpr int64_t kWidth = 8;

pipeline::LayerSeq trivial_model() {
  pipeline::LayerSeq model("engine-calibration");
  model.add(pipeline::make_layer("fc", "Linear", torch::nn::Linear(kWidth, kWidth)));
  return model;
}

at::Tensor mse(const at::Tensor& output, const at::Tensor& target) {
  return torch::mse_loss(output, target);
}

// The calibration's weights and data draw from ATen's default generator: it leaves the stream
// where it found it, so a profile changes nothing a caller seeded.
class KeepDefaultGenerator {
 public:
  KeepDefaultGenerator() {
    at::Generator default_generator = generator();
    std::lock_guard<std::mutex> lock(default_generator.mutex());
    state_ = default_generator.get_state();
  }
  ~KeepDefaultGenerator() {
    at::Generator default_generator = generator();
    std::lock_guard<std::mutex> lock(default_generator.mutex());
    default_generator.set_state(state_);
  }
  KeepDefaultGenerator(const KeepDefaultGenerator&) = delete;
  KeepDefaultGenerator& operator=(const KeepDefaultGenerator&) = delete;

 private:
  static at::Generator generator() { return at::detail::getDefaultCPUGenerator(); }
  at::Tensor state_;
};

}  // namespace

balance::EngineCost measure_engine_cost(int rounds) {
  const KeepDefaultGenerator keep;
  rounds = std::max(rounds, 3);
  const at::Tensor input = torch::randn({kChunks, kWidth});
  const at::Tensor target = torch::randn({kChunks, kWidth});
  const pipeline::Batch one(input.narrow(0, 0, 1));
  const pipeline::Batch all(input);

  pipeline::PipelineOptions options;
  options.checkpoint = pipeline::CheckpointMode::kNever;
  options.threads_per_stage = at::get_num_threads();
  options.chunks = 1;
  pipeline::Pipeline single(trivial_model(), {1}, {}, options);
  options.chunks = kChunks;
  pipeline::Pipeline several(trivial_model(), {1}, {}, options);

  std::vector<double> single_ms, several_ms;
  for (int r = -3; r < rounds; ++r) {  // three rounds of warm-up
    const double a = single.step(one, target.narrow(0, 0, 1), mse).step_ms;
    const double b = several.step(all, target, mse).step_ms;
    if (r < 0) continue;
    single_ms.push_back(a);
    several_ms.push_back(b);
  }

  ProfileOptions layer_options;
  layer_options.repeat = rounds;
  layer_options.measure_engine = false;
  const at::Tensor first_target = target.narrow(0, 0, 1);
  layer_options.loss = [first_target](const at::Tensor& output) {
    return mse(output, first_target);
  };
  const Profile layer = profile_model(trivial_model(), one, layer_options);
  const double compute_ms = layer.layers[0].forward_ms + layer.layers[0].backward_ms;

  const double per_micro_batch_ms = (median(several_ms) - median(single_ms)) / (kChunks - 1);
  balance::EngineCost cost;
  cost.action_ms = std::max(0.0, (per_micro_batch_ms - compute_ms) / 2);
  cost.step_ms = std::max(0.0, median(single_ms) - per_micro_batch_ms);
  return cost;
}

}  // namespace pipebal::profiler
