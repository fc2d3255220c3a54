// See training_run.h.
#include "pipebal/workflow/training_run.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <vector>

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "pipebal/common/machine_load.h"
#include "pipebal/distributed/c10d_transport.h"
#include "pipebal/distributed/replicas.h"
#include "pipebal/models/dataset.h"
#include "pipebal/models/synthetic.h"
#include "pipebal/models/zoo.h"
#include "pipebal/pipeline/dtype.h"
#include "pipebal/pipeline/error_text.h"
#include "pipebal/pipeline/pipeline.h"
#include "pipebal/profiler/cpu_memory.h"
#include "pipebal/profiler/device.h"
#include "pipebal/profiler/environment.h"
#include "pipebal/profiler/statistics.h"
#include "pipebal/profiler/taken_batch.h"
#include "pipebal/workflow/rank_gathering.h"
#include "pipebal/workflow/run_checks.h"
#include "pipebal/workflow/run_devices.h"
#include "pipebal/workflow/saved_model.h"
#include "pipebal/workflow/shared_settings.h"

namespace pipebal::workflow {
namespace {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(OptimizerKind kind,
                                                        const std::vector<at::Tensor>& params,
                                                        double lr) {
  // Past float32's largest value, LibTorch's optimizers fail converting it inside the step; Adam's
  // first step divides it by 1 - beta1 (0.1) first.
  const bool adam = kind == OptimizerKind::kAdam;
  const double most = adam ? 3.4e37 : 3.4e38;
  if (!(lr > 0) || lr > most) {
    throw std::invalid_argument(fmt::format("--lr must be positive and at most {:g}{}, got {:g}",
                                            most, adam ? " for adam" : "", lr));
  }
  if (adam) return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(lr));
  return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(lr));
}

}  // namespace

// The stages' workers own the cores (threads_per_stage each). Intra-op threads of the thread
// that makes the run (the optimizer step runs there) would compete with them: on a 2-core VM
// the plain model on a 2-thread stage took 50 ms a step beside that thread's 2-thread pool, 20 ms
// without it. Given back when the run ends, or when making it fails.
class OneIntraOpThread {
 public:
  OneIntraOpThread() : before_(at::get_num_threads()) { at::set_num_threads(1); }
  ~OneIntraOpThread() { at::set_num_threads(before_); }
  OneIntraOpThread(const OneIntraOpThread&) = delete;
  OneIntraOpThread& operator=(const OneIntraOpThread&) = delete;

 private:
  int before_;
};

// Memory a stage holds that was allocated before counting began (its parameters and buffers,
// made with the model): counted as the calling thread's while this lives.
class CountedAsHeld {
 public:
  explicit CountedAsHeld(int64_t bytes) : uncount_(profiler::CpuMemoryScope::count_held(bytes)) {}
  ~CountedAsHeld() { uncount_(); }
  CountedAsHeld(const CountedAsHeld&) = delete;
  CountedAsHeld& operator=(const CountedAsHeld&) = delete;

 private:
  std::function<void()> uncount_;
};

int64_t stage_weight_bytes(const pipeline::LayerSeq& stage) {
  int64_t bytes = 0;
  for (const at::Tensor& t : stage.parameters()) bytes += static_cast<int64_t>(t.nbytes());
  for (const at::Tensor& t : stage.buffers()) bytes += static_cast<int64_t>(t.nbytes());
  return bytes;
}

// The loss a run trains: --loss; else, on --data, mse for floating targets and cross entropy for
// class ids; else the model's own.
models::LossKind loss_of(const TrainSettings& settings, const models::Model& model,
                         const std::optional<models::Dataset>& dataset) {
  if (settings.loss) return *settings.loss;
  if (!dataset) return model.info.loss;
  return dataset->targets.is_floating_point() ? models::LossKind::kMse
                                              : models::LossKind::kCrossEntropy;
}

// Everything one run holds between its steps.
struct TrainingRun::State {
  OneIntraOpThread one_intra_op_thread;  // first made, last gone
  TrainSettings settings;
  models::Model model;
  std::vector<int64_t> shape;
  std::vector<models::InputSpec> inputs;  // synthetic data; empty with a data set
  models::SyntheticData data;
  std::optional<models::Dataset> dataset;  // the user's, when given
  std::vector<at::Tensor> order;           // its mini-batches, step by step
  std::optional<profiler::CpuMemoryScope> memory;
  int memory_tag_base = 0;
  std::shared_ptr<distributed::Group> group;  // of a multi-process run
  distributed::Placement placement;
  std::unique_ptr<distributed::GradientAverager> averager;
  std::vector<at::Tensor> stage_parameters;  // this rank's, averaged over the replicas
  // Each local stage's parameters and buffers, counted as its memory by its worker (indexed by
  // stage; gone after the pipeline, whose workers write them).
  std::vector<std::unique_ptr<CountedAsHeld>> held_weights;
  std::unique_ptr<pipeline::Pipeline> pipeline;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  pipeline::LossFn loss_fn;
  pipeline::LossTerms loss_terms;  // of the user's data (synthetic targets have none ignored)
  reports::RunRecord run;
  RankMeasurements measured;
  // Of a multi-process run: what this rank's cores took while it ran, for rank 0 to tell the
  // host's other work from the run's (one process alone is measured by its command).
  std::optional<MachineLoadMeter> load_meter;
  int next_step = 0;
};

TrainingRun::TrainingRun(const TrainSettings& settings, int memory_tag_base)
    : state_(std::make_unique<State>()) {
  State& st = *state_;
  st.settings = settings;
  check_run_limits(settings.steps, settings.warmup_steps, settings.step_timeout_s);
  st.model = models::build_model(settings.model, settings.seed);
  check_layer_names(st.model.layers, settings.layer_names, settings.model);
  const auto warn = [&settings](const std::optional<std::string>& line) {
    if (line && settings.warn) settings.warn(*line);
  };
  warn(nothing_to_train(st.model.layers));
  if (settings.deferred_batch_norm) check_batch_norm_to_defer(st.model.layers);
  std::optional<c10::ScalarType> dtype;
  if (!settings.dtype.empty()) {
    dtype = profiler::parse_dtype(settings.dtype);
    st.model.layers.to(*dtype);
  }
  if (!settings.save.empty() && !st.model.save) {
    throw std::invalid_argument(fmt::format(
        "--save writes a TorchScript model back with its trained weights, and {} is a built-in "
        "model: train a .pt file (--model, or a plan made from its profile) to save it",
        settings.model));
  }
  if (!settings.data.empty()) {
    if (!settings.input_shape.empty() || !settings.inputs.empty()) {
      throw std::invalid_argument("--data gives the inputs: leave out --input-shape and --input");
    }
    st.dataset = models::load_dataset(settings.data);
    // Converted first, as the model was: what is left to refuse (floating token ids for an
    // embedding, complex values) is refused whether the dtype came from --dtype, a plan or none.
    if (dtype) st.dataset->convert_floats(*dtype);
    check_data_dtype(*st.dataset, st.model.layers, settings.data);
    check_data_has_no_nan(*st.dataset, settings.loss != models::LossKind::kNone, settings.data);
    // Every replica's slice needs a sample per micro-batch.
    st.order = models::batch_order(st.dataset->size(), settings.batch_size, settings.epochs,
                                   settings.shuffle, settings.seed,
                                   int64_t{settings.chunks} * std::max(settings.replicas, 1));
    warn(batch_beyond_data(st.dataset->size(), settings.batch_size));
    warn(left_out_batch(st.dataset->size(), settings.batch_size, settings.chunks,
                        settings.replicas));
    st.settings.warmup_steps = 0;
    st.settings.steps = static_cast<int>(st.order.size());
    st.settings.input_shape = st.dataset->inputs[0].sizes().vec();
    st.settings.input_shape[0] =  // one replica's
        std::min(settings.batch_size, st.dataset->size()) / std::max(settings.replicas, 1);
  } else if (settings.loss) {
    throw std::invalid_argument(
        "--loss applies to --data (synthetic targets follow the model's own loss)");
  }
  if (st.dataset) {
    st.shape = st.settings.input_shape;
  } else {
    st.inputs = models::model_inputs(st.model, settings.inputs, settings.input_shape);
    if (dtype) st.inputs = models::with_float_dtype(st.inputs, *dtype);
    st.shape = st.inputs.front().shape;
  }
  if (settings.replicas < 1 || settings.replicas > 4096) {
    throw std::invalid_argument(
        fmt::format("--replicas must be between 1 and 4096, got {}", settings.replicas));
  }
  const bool multi_process = settings.launch && settings.launch->world_size > 1;
  if (st.dataset && settings.replicas > 1 &&
      (settings.batch_size % settings.replicas != 0 ||
       st.dataset->size() % settings.replicas != 0)) {
    // Equal slices of every mini-batch, the last one too: the replicas' mean is the batch's.
    throw std::invalid_argument(fmt::format(
        "--replicas {} splits every mini-batch into equal slices: --batch-size ({}) and the data's "
        "samples ({}) must be multiples of it",
        settings.replicas, settings.batch_size, st.dataset->size()));
  }
  if (settings.replicas > 1 && !multi_process) {
    const size_t stages_per_device = settings.schedule == pipeline::ScheduleKind::kInterleaved
                                         ? static_cast<size_t>(std::max(settings.virtual_stages, 1))
                                         : 1;
    const size_t processes =
        settings.balance.size() / stages_per_device * static_cast<size_t>(settings.replicas);
    throw std::invalid_argument(fmt::format(
        "{} replicas (--replicas, or the plan's) need one process per device and replica, {} in "
        "all: start them with pipebal launch --nproc-per-node {} (or torchrun)",
        settings.replicas, processes, processes));
  }
  if (multi_process) {
    const int per_device =
        settings.schedule == pipeline::ScheduleKind::kInterleaved ? settings.virtual_stages : 1;
    st.placement =
        distributed::place(settings.launch->world_size, static_cast<int>(settings.balance.size()),
                           settings.replicas, per_device);
  }
  if (st.dataset) {
    const at::Tensor sample_output =
        models::check_model_on(st.model, st.dataset->inputs_at(st.order.front()));
    check_targets(*st.dataset, loss_of(settings, st.model, st.dataset), sample_output,
                  settings.data);
  } else if (settings.replicas == 1) {
    st.data = models::make_synthetic_data(st.model, st.inputs, settings.seed);
  } else {
    // One data set of all the replicas' samples; each trains on its slice.
    const models::SyntheticData data = models::make_synthetic_data(
        st.model, models::with_batch_size(st.inputs, st.shape[0] * settings.replicas),
        settings.seed);
    const int64_t first = st.placement.replica_of(settings.launch->rank) * st.shape[0];
    for (const auto& t : data.input.tensors)
      st.data.input.tensors.push_back(t.narrow(0, first, st.shape[0]));
    st.data.target = data.target.narrow(0, first, st.shape[0]);
  }

  pipeline::PipelineOptions options;
  options.chunks = settings.chunks;
  options.schedule = settings.schedule;
  options.virtual_stages = settings.virtual_stages;
  options.weight_delays = settings.weight_delays;
  options.checkpoint = settings.checkpoint;
  options.threads_per_stage = settings.threads_per_stage;
  if (!settings.device_cpus.empty()) {
    if (settings.launch && settings.launch->world_size > 1) {
      throw std::invalid_argument(
          "stage threads are pinned in one process; pin processes with pipebal launch "
          "--bind-cores");
    }
    options.stage_cpus = stage_cpus(settings.device_cpus, settings.balance.size(),
                                    settings.schedule == pipeline::ScheduleKind::kInterleaved
                                        ? static_cast<size_t>(settings.virtual_stages)
                                        : 1);
  }
  options.deferred_batch_norm = settings.deferred_batch_norm;
  options.check_finite = settings.check_finite;
  options.step_timeout_s = settings.step_timeout_s;
  options.seed = settings.seed;
  // Each stage's allocations are counted under its own tag (from memory_tag_base, so that runs
  // alive side by side keep apart), for its peak memory, during the warm-up steps only:
  // counting puts bookkeeping into every allocation, which the timed steps should not pay
  // (with no warm-up step, every step is counted).
  const bool count_memory = std::all_of(settings.devices.begin(), settings.devices.end(),
                                        [](const std::string& d) { return d == "cpu"; });
  st.memory_tag_base = memory_tag_base;
  if (count_memory && memory_tag_base + static_cast<int>(settings.balance.size()) >
                          profiler::CpuMemoryScope::kMaxTags) {
    throw std::invalid_argument(
        fmt::format("{} stages: runs side by side count the memory of at most {} stages in all",
                    settings.balance.size(), profiler::CpuMemoryScope::kMaxTags));
  }
  if (count_memory) {
    st.memory.emplace();
    // A stage's weights are its memory too, though made with the model before counting began.
    pipeline::check_balance(settings.balance, st.model.layers.size());
    std::vector<int64_t> weight_bytes;
    size_t first = 0;
    for (const int layers : settings.balance) {
      weight_bytes.push_back(stage_weight_bytes(st.model.layers.slice(first, layers)));
      first += static_cast<size_t>(layers);
    }
    st.held_weights.resize(settings.balance.size());
    options.on_stage_enter = [memory_tag_base, weight_bytes, &held = st.held_weights](int stage) {
      profiler::CpuMemoryScope::set_thread_tag(memory_tag_base + stage);
      if (!held[stage]) held[stage] = std::make_unique<CountedAsHeld>(weight_bytes[stage]);
    };
  }
  pipeline::micro_batch_sizes(st.shape[0], settings.chunks);  // rejects more chunks than samples
  const std::vector<c10::Device> devices = resolve_devices(
      settings.devices, profiler::host_cuda_count(),
      multi_process ? std::optional<int>(settings.launch->local_rank) : std::nullopt);
  std::shared_ptr<pipeline::Transport> transport;
  if (multi_process) {
    const distributed::LaunchEnv& env = *settings.launch;
    const double timeout_s =
        settings.step_timeout_s > 0 ? settings.step_timeout_s : kDefaultProcessTimeoutS;
    st.group = std::make_shared<distributed::Group>(
        env, std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
    distributed::require_same_settings(
        *st.group, shared_settings(settings, st.model, st.dataset ? &*st.dataset : nullptr));
    // This rank's stages share its device: its first stage's, the stage numbered as its place
    // in the pipeline (placement.h).
    const size_t first_stage = static_cast<size_t>(st.placement.device_of(env.rank));
    c10::Device device = c10::kCPU;
    if (devices.size() == 1) {
      device = devices[0];
    } else if (first_stage < devices.size()) {
      device = devices[first_stage];
    }
    transport = distributed::c10d_transport(st.group, st.placement, device);
    st.averager = std::make_unique<distributed::GradientAverager>(st.group, st.placement);
    options.first_micro_batch = st.placement.replica_of(env.rank) * settings.chunks;
    if (settings.deferred_batch_norm && settings.replicas > 1) {
      options.sum_over_replicas = [averager = st.averager.get()](at::Tensor& values) {
        averager->sum(values);
      };
    }
    size_t first = 0;
    for (size_t s = 0; s < settings.balance.size(); ++s) {
      if (st.placement.runs(static_cast<int>(s), env.rank)) {
        for (const at::Tensor& p : st.model.layers.slice(first, settings.balance[s]).parameters())
          st.stage_parameters.push_back(p);
      }
      first += static_cast<size_t>(settings.balance[s]);
    }
  } else if (count_memory) {
    // A message one stage's thread takes from another's is the taker's memory, as it is in
    // another process (or on a device of its own).
    transport = pipeline::in_process_transport(profiler::count_as_taken);
  }
  st.pipeline = std::make_unique<pipeline::Pipeline>(st.model.layers, settings.balance, devices,
                                                     options, transport);
  st.optimizer = make_optimizer(settings.optimizer, st.model.layers.parameters(), settings.lr);
  const models::LossKind loss_kind = loss_of(settings, st.model, st.dataset);
  st.loss_fn = [loss_kind](const at::Tensor& out, const at::Tensor& target) {
    return models::compute_loss(loss_kind, out, target);
  };
  st.loss_terms = models::loss_terms(loss_kind);

  reports::RunRecord& run = st.run;
  run.model = st.model.layers.name();
  run.input_shape = st.shape;
  // --data: its inputs as one replica's mini-batch takes them ("int64[32,64]"), dtype included.
  run.inputs = models::to_strings(st.dataset ? st.dataset->input_specs(st.shape[0]) : st.inputs);
  run.dtype = settings.dtype.empty() ? "" : pipeline::dtype_name(*dtype);
  run.balance = settings.balance;
  run.devices = settings.devices;
  run.chunks = settings.chunks;
  run.schedule = pipeline::to_string(settings.schedule);
  run.virtual_stages = settings.virtual_stages;
  if (settings.schedule == pipeline::ScheduleKind::kZeroBubbleH1) {
    run.weight_delays =
        settings.weight_delays.empty()
            ? pipeline::h1_weight_delays(static_cast<int>(settings.balance.size()), settings.chunks)
            : settings.weight_delays;
    // As the schedule runs them: a delay past the micro-batches is every W after the last B.
    for (int& delay : run.weight_delays) delay = std::min(delay, settings.chunks);
  }
  run.checkpoint = pipeline::to_string(settings.checkpoint);
  run.threads_per_stage = settings.threads_per_stage;
  run.optimizer = to_string(settings.optimizer);
  run.lr = settings.lr;
  run.seed = settings.seed;
  run.warmup_steps = st.settings.warmup_steps;
  run.replicas = settings.replicas;
  run.loss = models::to_string(loss_kind);
  run.data = settings.data;
  run.environment = profiler::environment_json();
  st.measured.peak_bytes.assign(settings.balance.size(), -1);
  if (st.group) st.load_meter.emplace();
}

TrainingRun::~TrainingRun() = default;

int TrainingRun::total_steps() const {
  return state_->settings.warmup_steps + state_->settings.steps;
}

bool TrainingRun::warming_up() const {
  return state_->next_step < state_->settings.warmup_steps;
}

bool TrainingRun::done() const {
  return state_->next_step >= total_steps();
}

void TrainingRun::step(const StepCallback& on_step) {
  State& st = *state_;
  if (done()) throw std::logic_error("TrainingRun::step after the last step");
  const int step = st.next_step++;
  st.optimizer->zero_grad();
  if (st.memory) st.memory->reset_peak();
  const auto forward_backward = [&st, step, this] {
    if (!st.dataset) return st.pipeline->step(st.data.input, st.data.target, st.loss_fn);
    // With replicas, each trains on its equal slice of the mini-batch.
    at::Tensor samples = st.order[step];
    if (st.settings.replicas > 1) {
      const int64_t slice = samples.size(0) / st.settings.replicas;
      samples = samples.narrow(0, st.placement.replica_of(rank()) * slice, slice);
    }
    return st.pipeline->step(st.dataset->inputs_at(samples), st.dataset->targets_at(samples),
                             st.loss_fn, st.loss_terms);
  };
  pipeline::StepResult result;
  try {
    if (st.settings.rehearse && step >= st.settings.warmup_steps) {
      forward_backward();
      st.optimizer->zero_grad();
    }
    result = forward_backward();
  } catch (const std::exception& error) {
    // Which step failed, for the line the user reads (the stage and micro-batch are in it).
    // Only the types that end here as this process's own failure, rethrown as they were; an
    // echo of another rank's failure, a timeout or a bug keeps its own words.
    const int warmup = st.settings.warmup_steps;
    const std::string what =
        step < warmup
            ? fmt::format("warm-up step {} of {}: {}", step + 1, warmup, error.what())
            : fmt::format("step {} of {}: {}", step - warmup + 1, st.settings.steps, error.what());
    if (typeid(error) == typeid(std::runtime_error)) throw std::runtime_error(what);
    if (typeid(error) == typeid(std::invalid_argument)) throw std::invalid_argument(what);
    throw;
  }
  // One process holds every stage's gradients (across processes a stage may have none).
  if (step == 0 && !st.group) check_something_trains(st.model.layers);
  for (size_t s = 0; st.memory && s < st.measured.peak_bytes.size(); ++s) {
    if (!st.pipeline->runs_stage(static_cast<int>(s))) continue;
    st.measured.peak_bytes[s] = std::max(
        st.measured.peak_bytes[s], st.memory->peak_bytes(st.memory_tag_base + static_cast<int>(s)));
  }
  if (st.averager) {
    const auto start = std::chrono::steady_clock::now();
    st.averager->average(st.stage_parameters);
    result.loss = st.averager->mean(result.loss);  // the whole mini-batch's
    result.step_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  st.optimizer->step();
  if (st.memory && step + 1 == st.settings.warmup_steps) st.memory.reset();
  if (on_step) on_step(step, total_steps(), result.step_ms, result.loss);
  if (step < st.settings.warmup_steps) return;
  st.run.steps.push_back({step - st.settings.warmup_steps, result.step_ms, result.loss});
  st.measured.timelines.push_back(std::move(result.timeline));
  st.measured.origins_ms.push_back(result.origin_ms);
}

int TrainingRun::rank() const {
  return state_->group ? state_->group->rank() : 0;
}

reports::RunRecord TrainingRun::finish() {
  State& st = *state_;
  if (!done()) throw std::logic_error("TrainingRun::finish before the last step");
  if (st.group) {
    gather_measurements(*st.group, st.placement, st.load_meter->use(), st.measured, st.run);
  }
  if (st.group && !st.settings.save.empty()) {
    gather_weights(*st.group, st.placement, st.model.layers, st.settings.balance);
  }
  if (!st.settings.save.empty() && rank() == 0) save_trained_model(st.model, st.settings.save);
  reports::RunRecord run = st.run;
  std::vector<double> ms;
  for (const auto& s : run.steps) ms.push_back(s.ms);
  run.median_step_ms = profiler::median(ms);
  run.p10_step_ms = profiler::percentile(ms, 10);
  run.p90_step_ms = profiler::percentile(ms, 90);
  run.samples_per_s = 1000.0 * double(st.shape[0] * st.settings.replicas) / run.median_step_ms;

  // The representative step: the one closest to the median.
  size_t representative = 0;
  for (size_t i = 0; i < ms.size(); ++i) {
    if (std::abs(ms[i] - run.median_step_ms) < std::abs(ms[representative] - run.median_step_ms)) {
      representative = i;
    }
  }
  run.timeline = st.measured.timelines[representative];
  run.timeline_step = static_cast<int>(representative);
  const int stages = static_cast<int>(st.settings.balance.size());
  const std::vector<double> busy = pipeline::busy_ms_per_stage(run.timeline, stages);
  const double span = pipeline::span_ms(run.timeline);
  int first = 0;
  for (int s = 0; s < stages; ++s) {
    reports::StageRun stage;
    stage.index = s;
    stage.first_layer = first;
    stage.layers = st.settings.balance[s];
    stage.busy_ms = busy[s];
    stage.busy_fraction = span > 0 ? busy[s] / span : 0;
    stage.peak_memory_bytes = st.measured.peak_bytes[s];
    run.stages.push_back(stage);
    first += st.settings.balance[s];
  }
  return run;
}

void TrainingRun::run_on_stage_thread(int stage, const std::function<void()>& job) {
  state_->pipeline->run_on_stage_thread(stage, job);
}

reports::RunRecord run_training(const TrainSettings& settings, const StepCallback& on_step) {
  TrainingRun run(settings);
  while (!run.done()) run.step(on_step);
  return run.finish();
}

}  // namespace pipebal::workflow
