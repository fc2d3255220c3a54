// One pipelined training run of a zoo or TorchScript model on synthetic data: what
// `pipebal train` executes and what `pipebal validate` repeats for every candidate balance.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pipebal/distributed/launch_env.h"
#include "pipebal/models/loss_kind.h"
#include "pipebal/pipeline/schedule.h"
#include "pipebal/reports/run_record.h"
#include "pipebal/workflow/optimizer_kind.h"

namespace pipebal::workflow {

struct TrainSettings {
  std::string model;
  std::vector<int64_t> input_shape;  // empty: the model's default
  // `--input` specs (models/input_spec.h), one per forward argument, instead of input_shape.
  std::vector<std::string> inputs;
  std::vector<int> balance;
  std::vector<std::string> devices{"cpu"};
  int chunks = pipeline::kDefaultChunks;
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::kGPipe;
  int virtual_stages = 1;          // stages per device (interleaved); `balance` lists every stage
  std::vector<int> weight_delays;  // zb-h1: W delay per stage; empty: H1's (pipeline/schedule.h)
  pipeline::CheckpointMode checkpoint = pipeline::CheckpointMode::kExceptLast;
  int threads_per_stage = 1;
  // The CPUs each device's stage thread and its intra-op threads are pinned to, one list per
  // device (common/thread_pinning.h: cores_for_groups gives each its own); empty: not pinned.
  std::vector<std::vector<int>> device_cpus;
  // float32, float64, float16 or bfloat16: the model's parameters and floating inputs (and
  // data) are converted to it; empty: trained as loaded. A name, as a plan.json carries it
  // (balance::Plan, which needs no LibTorch, nor do these settings).
  std::string dtype;
  int steps = 10;
  int warmup_steps = 2;
  OptimizerKind optimizer = OptimizerKind::kSgd;
  double lr = 0.01;
  uint64_t seed = 0;
  bool deferred_batch_norm = false;
  bool check_finite = false;
  double step_timeout_s = 0;  // a step running longer fails with pipeline::StepTimeout; 0: never
  // Before each measured step, its forward and backward run once unmeasured and without an
  // update, so that the measured step starts with this run's weights, activations and threads
  // warm even when other runs took turns in between (run_interleaved, workflow/interleaved_runs.h).
  // It draws its own dropout masks and updates batch-norm statistics: for measuring, not for
  // training a model to keep.
  bool rehearse = false;
  // One process per stage (rank r runs stage r) over c10d when set with world_size > 1, e.g.
  // from torchrun's environment (distributed::launch_env_from_process()). Every process runs
  // the same settings; rank 0's finish() returns the whole run.
  std::optional<distributed::LaunchEnv> launch;
  // Pipelines trained data-parallel in a multi-process run (world size = stages x replicas):
  // each trains on its own input_shape batch, and the stages' gradients are averaged over the
  // replicas after every step, as one pipeline would train on all the batches together.
  int replicas = 1;
  // Training on the user's data (models/dataset.h) instead of a synthetic batch: `epochs`
  // passes in mini-batches of `batch_size` samples, in file order or shuffled from `seed`.
  // Every step trains on the data and is recorded (no warm-up steps; `steps` does not apply).
  std::string data;
  int epochs = 1;
  int64_t batch_size = 32;
  bool shuffle = false;
  // With `data` only; unset: cross entropy for integer targets, mse for floating ones (synthetic
  // data trains the model's own loss, models::ModelInfo::loss).
  std::optional<models::LossKind> loss;
  // After the run, a TorchScript model is written here with its trained parameters.
  std::string save;
  // A plan's layers (balance::Plan::layer_names), when training one: the model must have
  // exactly these, or the plan was made for another model. Empty: not checked.
  std::vector<std::string> layer_names;
  // Told, as one line, of what a user may not expect of the run (the last mini-batch of each
  // epoch left out, too small for the micro-batches; a model with nothing to train); may be
  // empty.
  std::function<void(const std::string&)> warn;
};

// How long a multi-process run waits for the other processes (to connect, to send) when no
// step timeout is given.
constexpr double kDefaultProcessTimeoutS = 300;

// Called after every step (warm-up included) with the step index, the number of steps in all,
// its time and loss.
using StepCallback = std::function<void(int step, int total, double ms, double loss)>;

// One run, a step at a time: builds the model and data from `settings.seed` and the pipeline,
// then trains `warmup_steps + steps` steps and records the measured ones. Per-stage memory is
// counted under tags memory_tag_base + stage (CpuMemoryScope), during the warm-up steps.
// While it lives, the constructing thread (which runs the optimizer step) has one intra-op
// thread, so that it does not compete with the stages' workers for the cores; it gets its count
// back when the run ends or fails to be made. Throws std::invalid_argument for bad settings.
class TrainingRun {
 public:
  explicit TrainingRun(const TrainSettings& settings, int memory_tag_base = 0);
  ~TrainingRun();
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  int total_steps() const;
  bool warming_up() const;
  bool done() const;
  // Runs the next step, warm-up steps first.
  void step(const StepCallback& on_step = {});
  // The record of the measured steps; call once done(). In a multi-process run, every process
  // must call it: rank 0 gets the whole run (every stage's timeline and memory, every process's
  // peak RSS), the others their own part.
  reports::RunRecord finish();
  // Rank of this process in a multi-process run; 0 otherwise.
  int rank() const;
  // Runs `job` on the thread of stage `stage` (run here), with its intra-op thread pool, between
  // steps (pipeline::Pipeline::run_on_stage_thread).
  void run_on_stage_thread(int stage, const std::function<void()>& job);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// A whole TrainingRun.
reports::RunRecord run_training(const TrainSettings& settings, const StepCallback& on_step = {});

}  // namespace pipebal::workflow
