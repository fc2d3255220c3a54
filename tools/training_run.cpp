// See training_run.h.
#include "tools/training_run.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>
#include <torch/torch.h>

#include "models/synthetic.h"
#include "models/zoo.h"
#include "pipeline/pipeline.h"
#include "profiler/cpu_memory.h"
#include "profiler/environment.h"
#include "profiler/statistics.h"

namespace pipebal::tools {
namespace {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::string& name,
                                                        const std::vector<at::Tensor>& params,
                                                        double lr) {
  if (!(lr > 0))
    throw std::invalid_argument(fmt::format("learning rate must be positive, got {}", lr));
  if (name == "sgd")
    return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(lr));
  if (name == "adam")
    return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(lr));
  throw std::invalid_argument("unknown optimizer '" + name + "' (valid: sgd, adam)");
}

std::vector<c10::Device> parse_devices(const std::vector<std::string>& names) {
  std::vector<c10::Device> devices;
  for (const auto& name : names) {
    try {
      devices.emplace_back(name);
    } catch (const c10::Error&) {
      throw std::invalid_argument("unknown device '" + name + "' (e.g. cpu, cuda:0)");
    }
    if (devices.back().is_cuda() && !torch::cuda::is_available()) {
      throw std::invalid_argument("device '" + name +
                                  "' requested, but no CUDA device is available");
    }
  }
  return devices;
}

}  // namespace

std::vector<int> parse_balance(const std::string& text) {
  std::vector<int> balance;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    size_t used = 0;
    int value = 0;
    try {
      value = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size()) {
      throw std::invalid_argument(
          fmt::format("balance '{}': expected layer counts separated by commas, e.g. 3,3,2", text));
    }
    balance.push_back(value);
    start = comma + 1;
  }
  return balance;
}

reports::RunRecord run_training(const TrainSettings& settings, const StepCallback& on_step) {
  if (settings.steps < 1)
    throw std::invalid_argument(fmt::format("steps must be at least 1, got {}", settings.steps));
  if (settings.warmup_steps < 0) throw std::invalid_argument("warm-up steps must not be negative");
  models::Model model = models::build_model(settings.model, settings.seed);
  const std::vector<int64_t> shape =
      settings.input_shape.empty() ? model.info.default_input_shape : settings.input_shape;
  if (shape.empty()) {
    throw std::invalid_argument("the model has no default input shape: give --input-shape");
  }
  const models::SyntheticData data = models::make_synthetic_data(model, shape, settings.seed);

  pipeline::PipelineOptions options;
  options.chunks = settings.chunks;
  options.schedule = pipeline::parse_schedule_kind(settings.schedule);
  options.checkpoint = pipeline::parse_checkpoint_mode(settings.checkpoint);
  options.threads_per_stage = settings.threads_per_stage;
  options.deferred_batch_norm = settings.deferred_batch_norm;
  options.check_finite = settings.check_finite;
  options.seed = settings.seed;
  // Each stage's allocations are counted under its own tag, for its peak memory, during the
  // warm-up steps only: counting puts bookkeeping into every allocation, which the timed steps
  // should not pay (with no warm-up step, every step is counted).
  const bool count_memory = std::all_of(settings.devices.begin(), settings.devices.end(),
                                        [](const std::string& d) { return d == "cpu"; });
  std::optional<profiler::CpuMemoryScope> memory;
  if (count_memory) {
    memory.emplace();
    options.on_worker_start = [](int stage) { profiler::CpuMemoryScope::set_thread_tag(stage); };
  }
  pipeline::micro_batch_sizes(shape[0], settings.chunks);  // rejects more chunks than samples early
  pipeline::Pipeline pipeline(model.layers, settings.balance, parse_devices(settings.devices),
                              options);
  auto optimizer = make_optimizer(settings.optimizer, model.layers.parameters(), settings.lr);
  const models::LossKind loss_kind = model.info.loss;
  const pipeline::LossFn loss_fn = [loss_kind](const at::Tensor& out, const at::Tensor& target) {
    return models::compute_loss(loss_kind, out, target);
  };

  reports::RunRecord run;
  run.model = model.layers.name();
  run.input_shape = shape;
  run.balance = settings.balance;
  run.devices = settings.devices;
  run.chunks = settings.chunks;
  run.schedule = settings.schedule;
  run.checkpoint = settings.checkpoint;
  run.threads_per_stage = settings.threads_per_stage;
  run.optimizer = settings.optimizer;
  run.lr = settings.lr;
  run.seed = settings.seed;
  run.warmup_steps = settings.warmup_steps;
  run.environment = profiler::environment_json();

  std::vector<pipeline::Timeline> timelines;
  const int stages = static_cast<int>(settings.balance.size());
  std::vector<int64_t> peak_bytes(stages, -1);
  const int total = settings.warmup_steps + settings.steps;
  for (int step = 0; step < total; ++step) {
    optimizer->zero_grad();
    if (memory) memory->reset_peak();
    pipeline::StepResult result = pipeline.step(data.input, data.target, loss_fn);
    for (int s = 0; memory && s < stages; ++s) {
      peak_bytes[s] = std::max(peak_bytes[s], memory->peak_bytes(s));
    }
    optimizer->step();
    if (memory && step + 1 == settings.warmup_steps) memory.reset();
    if (on_step) on_step(step, total, result.step_ms, result.loss);
    if (step < settings.warmup_steps) continue;
    run.steps.push_back({step - settings.warmup_steps, result.step_ms, result.loss});
    timelines.push_back(std::move(result.timeline));
  }

  std::vector<double> ms;
  for (const auto& s : run.steps) ms.push_back(s.ms);
  run.median_step_ms = profiler::median(ms);
  run.p10_step_ms = profiler::percentile(ms, 10);
  run.p90_step_ms = profiler::percentile(ms, 90);
  run.samples_per_s = 1000.0 * double(shape[0]) / run.median_step_ms;

  // The representative step: the one closest to the median.
  size_t representative = 0;
  for (size_t i = 0; i < ms.size(); ++i) {
    if (std::abs(ms[i] - run.median_step_ms) < std::abs(ms[representative] - run.median_step_ms)) {
      representative = i;
    }
  }
  run.timeline = timelines[representative];
  const std::vector<double> busy = pipeline::busy_ms_per_stage(run.timeline, stages);
  const double span = pipeline::span_ms(run.timeline);
  int first = 0;
  for (int s = 0; s < stages; ++s) {
    reports::StageRun stage;
    stage.index = s;
    stage.first_layer = first;
    stage.layers = settings.balance[s];
    stage.busy_ms = busy[s];
    stage.busy_fraction = span > 0 ? busy[s] / span : 0;
    stage.peak_memory_bytes = peak_bytes[s];
    run.stages.push_back(stage);
    first += settings.balance[s];
  }
  return run;
}

}  // namespace pipebal::tools
