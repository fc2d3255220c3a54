// The micro-batch pipeline engine. Each device's stages run on one worker thread, which executes
// their actions in the device's order from the shared schedule definition (schedule.h): with one
// stage per device, that stage's action list. Stages exchange activations
// forward and gradients backward through the channels of a transport (transport.h): mailboxes
// between threads of this process, or c10d between processes. A step leaves the same
// accumulated gradients on the parameters as the plain model's forward and backward on the
// whole batch.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <stdexcept>
#include <vector>

#include "pipebal/pipeline/layer_seq.h"
#include "pipebal/pipeline/schedule.h"
#include "pipebal/pipeline/stage.h"
#include "pipebal/pipeline/timeline.h"
#include "pipebal/pipeline/transport.h"

namespace pipebal::pipeline {

struct BatchNormImpl;

// The most stages a pipeline has in one process (each device's stages share a thread of it).
constexpr int kMaxStages = 512;

// Throws std::invalid_argument unless 1 <= threads <= the cores this process may run on (taskset,
// a cpuset; common/cores.h): what each CPU stage's
// worker may use (PipelineOptions::threads_per_stage).
void check_threads_per_stage(int threads);

struct PipelineOptions {
  int chunks = 4;
  ScheduleKind schedule = ScheduleKind::kGPipe;
  // Stages per device with ScheduleKind::kInterleaved: the stages of one device (d, d + devices,
  // ...) share its worker thread, which runs their actions in the device's order.
  int virtual_stages = 1;
  // With ScheduleKind::kZeroBubbleH1: each stage's W delay (Schedule::weight_delays); empty: H1's.
  std::vector<int> weight_delays;
  CheckpointMode checkpoint = CheckpointMode::kExceptLast;
  int threads_per_stage = 1;  // intra-op threads of each CPU stage's worker
  // The CPUs each stage's worker thread is pinned to, with the intra-op threads it starts; one
  // list per stage (a device's stages, interleaved, share its worker: the same list), or empty:
  // the scheduler places them. Pinned, a stage keeps the core the plan priced for the whole run
  // (common/thread_pinning.h).
  std::vector<std::vector<int>> stage_cpus;
  bool deferred_batch_norm = false;  // running statistics once per mini-batch (batch_norm.h)
  bool check_finite = false;         // a non-finite micro-batch loss fails the step
  uint64_t seed = 0;                 // seeds stochastic layers per (step, stage, micro-batch)
  // Where this pipeline's micro-batches stand among the mini-batch's: replica r of a pipeline
  // trains micro-batches r × chunks onwards. Stochastic layers are seeded by that place, so
  // that the replicas draw the masks one pipeline over the whole mini-batch would (in R × chunks
  // micro-batches, the same ones when each replica's samples divide evenly into its chunks).
  int first_micro_batch = 0;
  // A step (or forward) still running after this many seconds throws StepTimeout; 0: never.
  double step_timeout_s = 0;
  // Runs on a worker thread whenever it begins to work for `stage`, e.g. to attribute its
  // allocations to the stage: first when the worker starts, once for each of its stages in
  // order; then, on a thread that runs several stages (interleaved), before each action or job
  // of a stage that follows one of another.
  std::function<void(int stage)> on_stage_enter;
  // With deferred batch norm and replicas of the pipeline: sums, in place, a float64 CPU tensor
  // over the replicas of this process's stages. The statistics the step's micro-batches
  // accumulated in this process's batch norms (in layer order, BatchNormImpl::
  // pending_statistics) are summed before they are committed: the running statistics are then
  // those of the replicas' whole mini-batch, the same on every replica.
  std::function<void(at::Tensor& values)> sum_over_replicas;
};

// A step ran past PipelineOptions::step_timeout_s; the message names each stage still running
// and its action. A layer that never returns cannot be stopped: the pipeline is abandoned
// (further steps throw, its destructor leaves the stuck threads' state alive) and the process
// should exit.
class StepTimeout : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct StepResult {
  double loss = 0;     // the whole batch's loss (sum of the weighted micro-batch losses)
  double step_ms = 0;  // wall time of the step
  Timeline timeline;   // every action of this process's stages, in ms since `origin_ms`
  // The step's clock origin on the clock all processes share (Transport::clock_offset_ms), in
  // ms: timelines of different processes line up once shifted by their origins' difference.
  double origin_ms = 0;
};

class Pipeline {
 public:
  // Splits `layers` into stages of `balance[s]` layers on `devices[s]` (one device for all
  // stages when a single one is given; none: the CPU). The layers are shared, not copied: training
  // through the pipeline trains `layers`. Throws std::invalid_argument for a balance that does not
  // cover the layers exactly, an empty stage, or a wrong number of devices.
  // The transport says which stages run here (all, by default) and joins them to their
  // neighbours; with several processes, each builds the same Pipeline over the same layers
  // and runs its own stages, and the layers of the others stay untouched.
  Pipeline(LayerSeq layers, std::vector<int> balance, std::vector<c10::Device> devices,
           PipelineOptions options, std::shared_ptr<Transport> transport = nullptr);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Forward and backward of every micro-batch in schedule order; gradients accumulate on the
  // parameters (zero them between steps, as with any optimizer). On failure, throws one
  // std::runtime_error naming stage, layer and micro-batch after every stage has stopped;
  // the pipeline stays usable. Call from one thread at a time. Each micro-batch's loss counts
  // by its share of the mini-batch's loss terms (`loss_terms`; null: of its samples), so that the
  // step's loss and gradients are those of one pass over the mini-batch.
  StepResult step(const Batch& input, const at::Tensor& target, const LossFn& loss_fn,
                  const LossTerms& loss_terms = nullptr);

  // Pipelined inference under no-grad; returns the gathered output (in the process that runs
  // the last stage; an empty batch in the others).
  Batch forward(const Batch& input);

  // Runs `job` on the thread of stage `s` (its device's worker), with the stage's intra-op thread
  // pool, between steps, and waits for it; rethrows what it throws. For work that should share the
  // stage's threads rather than start a pool of its own beside them (validate --auto profiles the
  // plain model on several threads so). Throws std::invalid_argument when this process does not run
  // stage `s`.
  void run_on_stage_thread(int s, const std::function<void()>& job);

  int stages() const { return static_cast<int>(stages_.size()); }
  // Whether this process runs stage `s`; std::out_of_range past the stages.
  bool runs_stage(int s) const { return stages_.at(static_cast<size_t>(s)) != nullptr; }
  const std::vector<int>& balance() const { return balance_; }
  const PipelineOptions& options() const { return options_; }
  const Schedule& schedule() const { return schedule_; }
  // The model's layers, shared with the stages that run them (a LayerSeq is a handle: its const
  // methods to() and train() change the layers): move or convert them only before the pipeline
  // is made, or make it anew.
  const LayerSeq& layers() const { return layers_; }

 private:
  struct Links;
  struct StepWork;
  struct ParallelRun;
  // What one worker thread runs: the stages of one device held by this process, and their
  // actions in the device's order (Schedule::device_order).
  struct WorkerPlan {
    std::vector<int> stages;
    std::vector<DeviceStep> order;
  };
  static void run_worker(const WorkerPlan& plan, StepWork& work, int& current);
  static void run_action(int s, const Action& action, StepWork& work);
  static void record_failure(ParallelRun& run, Links& links, const std::string& what,
                             std::exception_ptr error);
  // Runs job(w, current) on every worker w and waits for all. The job keeps `current` at the
  // stage it works for: a failure is reported as that stage's.
  void run_parallel(std::function<void(size_t worker, int& current)> job);
  void wait_for_stages(std::vector<std::future<void>>& done);
  // pipebal's BatchNorm modules in the layers, in order; `local_only`: of this process's stages.
  std::vector<BatchNormImpl*> batch_norms(bool local_only) const;
  void set_deferred_batch_norm(bool on, bool commit);
  void sum_batch_norm_statistics();

  LayerSeq layers_;
  std::vector<int> balance_;
  PipelineOptions options_;
  Schedule schedule_;
  std::shared_ptr<Transport> transport_;
  std::vector<std::unique_ptr<Stage>> stages_;  // null where another process runs the stage
  std::vector<int> local_stages_;
  std::unique_ptr<Links> links_;
  // Shared with the jobs, which must not touch the Pipeline object (see StepWork).
  std::shared_ptr<const std::vector<WorkerPlan>> plans_;
  std::vector<std::unique_ptr<class Worker>> workers_;  // one per plan
  std::vector<int> worker_of_;                          // per stage; -1 where not local
  // What each stage is doing, for a timeout's message: (action kind + 1) << 32 | micro-batch.
  std::unique_ptr<std::atomic<uint64_t>[]> activity_;
  bool abandoned_ = false;
  uint64_t steps_ = 0;
};

}  // namespace pipebal::pipeline
