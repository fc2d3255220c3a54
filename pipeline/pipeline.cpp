// See pipeline.h.
#include "pipeline/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <thread>

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "common/time_limit.h"
#include "pipeline/batch_norm.h"
#include "pipeline/error_text.h"
#include "pipeline/module_layer.h"
#include "pipeline/spinning_condition.h"
#include "pipeline/transfer.h"
#include "pipeline/worker.h"

namespace pipebal::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// splitmix64: decorrelated seeds from (seed, step, stage, micro-batch).
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A stage's activity word, read by a timeout's message: which action it is computing, or 0
// while it waits for a message.
uint64_t computing(ActionKind kind, int micro_batch) {
  return (uint64_t(int(kind) + 1) << 32) | uint32_t(micro_batch);
}

const char* action_name(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward:
      return "forward";
    case ActionKind::kRecompute:
      return "recompute";
    case ActionKind::kBackward:
      return "backward";
    case ActionKind::kWeight:
      return "weight gradients";
  }
  return "action";
}

// Tells a stage's incoming channels (null: none) which micro-batches it will take, in order.
void expect_inputs(const std::vector<Action>& actions, Channel* activations, Channel* gradients) {
  std::vector<int> forward, backward;
  for (const Action& action : actions) {
    if (action.kind == ActionKind::kForward) forward.push_back(action.micro_batch);
    if (action.kind == ActionKind::kBackward) backward.push_back(action.micro_batch);
  }
  if (activations) activations->expect(forward);
  if (gradients) gradients->expect(backward);
}

}  // namespace

// Whose turn it is on each device whose stages share it (the interleaved schedule): a stage
// waits until the device's order reaches its action, runs it, and passes the turn on. A device
// then runs one action at a time, in the order the simulator walks.
class DeviceTurns {
 public:
  explicit DeviceTurns(int devices) : next_(devices, 0) {}

  // Blocks until `position` of `device`'s order is next; throws ChannelCancelled once cancelled.
  void wait(int device, int position) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return cancelled_ || next_[device] == position; });
    if (cancelled_) throw ChannelCancelled();
  }
  void pass(int device) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++next_[device];
    }
    changed_.notify_all();
  }
  void cancel() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      cancelled_ = true;
    }
    changed_.notify_all();
  }
  void reset() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::fill(next_.begin(), next_.end(), 0);
    cancelled_ = false;
  }

 private:
  std::mutex mutex_;
  SpinningCondition changed_;
  std::vector<int> next_;
  bool cancelled_ = false;
};

// Channels between neighbouring stages: forward[s] carries stage s's outputs to stage s+1,
// backward[s] carries stage s+1's input gradients to stage s. Only those with a stage of this
// process at one end exist. With several stages per device, also the devices' turns.
struct Pipeline::Links {
  std::vector<std::unique_ptr<Channel>> forward;
  std::vector<std::unique_ptr<Channel>> backward;
  std::unique_ptr<DeviceTurns> turns;

  Links(Transport& transport, const std::vector<std::unique_ptr<Stage>>& stages, int devices) {
    if (devices < static_cast<int>(stages.size())) turns = std::make_unique<DeviceTurns>(devices);
    for (size_t s = 0; s + 1 < stages.size(); ++s) {
      const bool ours = stages[s] != nullptr || stages[s + 1] != nullptr;
      forward.push_back(ours ? transport.connect(int(s), int(s) + 1) : nullptr);
      backward.push_back(ours ? transport.connect(int(s) + 1, int(s)) : nullptr);
    }
  }
  template <typename F>
  void for_each(F f) {
    for (auto& c : forward)
      if (c) f(*c);
    for (auto& c : backward)
      if (c) f(*c);
  }
  void cancel() {
    for_each([](Channel& c) { c.cancel(); });
    if (turns) turns->cancel();
  }
  void reset() {
    for_each([](Channel& c) { c.reset(); });
    if (turns) turns->reset();
  }
};

void check_threads_per_stage(int threads) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (threads < 1 || threads > cores) {
    throw std::invalid_argument(
        fmt::format("threads per stage must be between 1 and the {} cores of this machine, got {}",
                    cores, threads));
  }
}

Pipeline::Pipeline(LayerSeq layers, std::vector<int> balance, std::vector<c10::Device> devices,
                   PipelineOptions options, std::shared_ptr<Transport> transport)
    : layers_(std::move(layers)),
      balance_(std::move(balance)),
      options_(options),
      transport_(transport ? std::move(transport) : in_process_transport()) {
  check_balance(balance_, layers_.size());
  const int stages = static_cast<int>(balance_.size());
  if (devices.empty()) devices.push_back(c10::Device(c10::kCPU));
  if (devices.size() == 1) devices.resize(stages, devices.front());
  if (static_cast<int>(devices.size()) != stages) {
    throw std::invalid_argument(
        fmt::format("{} devices given for {} stages", devices.size(), stages));
  }
  if (stages > kMaxStages) {
    throw std::invalid_argument(fmt::format(
        "{} stages: at most {} (each stage is a thread of this process)", stages, kMaxStages));
  }
  check_threads_per_stage(options_.threads_per_stage);
  check_time_limit(options_.step_timeout_s, "the step timeout", "none");
  if (options_.deferred_batch_norm) {
    for (size_t l = 0; l < layers_.size(); ++l) {
      if (!layers_[l].has_other_batch_norm()) continue;
      throw std::invalid_argument(fmt::format(
          "deferred batch norm: layer {} ('{}', {}) holds a batch norm other than pipebal's "
          "BatchNorm (the zoo models'), whose running statistics it cannot defer; train without "
          "it, or use pipeline::BatchNorm",
          l, layers_[l].name(), layers_[l].type()));
    }
  }
  schedule_ = make_schedule(options_.schedule, stages, options_.chunks, options_.checkpoint,
                            options_.virtual_stages, options_.weight_delays);
  size_t first = 0;
  for (int s = 0; s < stages; ++s) {
    if (transport_->runs_stage(s, stages)) {
      LayerSeq part = layers_.slice(first, balance_[s]);
      part.to(devices[s]);
      stages_.push_back(std::make_unique<Stage>(s, first, std::move(part), devices[s]));
      local_stages_.push_back(s);
    } else {
      stages_.push_back(nullptr);
    }
    first += balance_[s];
  }
  links_ = std::make_unique<Links>(*transport_, stages_, schedule_.devices());
  if (schedule_.devices() < stages) {  // each action's place in its device's order
    turn_.resize(stages);
    for (int s = 0; s < stages; ++s) turn_[s].resize(schedule_.actions[s].size());
    for (const auto& order : schedule_.device_order) {
      for (size_t position = 0; position < order.size(); ++position) {
        turn_[order[position].stage][order[position].index] = static_cast<int>(position);
      }
    }
  }
  activity_ = std::make_unique<std::atomic<uint64_t>[]>(stages);
  for (int s = 0; s < stages; ++s) activity_[s] = 0;
  const int threads = options_.threads_per_stage;
  for (int s : local_stages_) {
    workers_.push_back(std::make_unique<Worker>([threads, s, hook = options_.on_worker_start] {
      // Initialise this thread's intra-op settings first, so that ATen's lazy per-thread
      // initialisation cannot later reset them to the process-wide value.
      at::internal::lazy_init_num_threads();
      at::set_num_threads(threads);
      if (hook) hook(s);
    }));
  }
  // A worker whose start failed fails here, where nothing waits on it: in a step, its stage's
  // neighbours would wait for its messages.
  for (auto& worker : workers_) worker->submit([] {}).get();
}

Pipeline::~Pipeline() {
  if (!abandoned_) return;
  // A stage may still be running a layer that never returned: its thread goes on using the
  // stages, mailboxes and worker, so they are left alive (the process is expected to exit).
  for (auto& stage : stages_) (void)stage.release();
  (void)links_.release();
  for (auto& worker : workers_) (void)worker.release();
  (void)activity_.release();
}

void Pipeline::run_on_stage_thread(int s, const std::function<void()>& job) {
  if (abandoned_) {
    throw std::logic_error("the pipeline was abandoned after a step timed out");
  }
  const auto local = std::find(local_stages_.begin(), local_stages_.end(), s);
  if (local == local_stages_.end()) {
    throw std::invalid_argument(fmt::format("stage {} does not run in this process", s));
  }
  workers_[static_cast<size_t>(local - local_stages_.begin())]->submit(job).get();
}

// One run of a job on every stage. Held by the jobs themselves, so that a stage still running
// after a timeout never touches freed memory.
struct Pipeline::ParallelRun {
  std::function<void(int)> job;
  std::shared_ptr<Transport> transport;
  std::mutex error_mutex;
  std::exception_ptr first_error;
};

// The first failure of a run is the one its step throws; every local channel is cancelled and
// the other processes are told.
void Pipeline::record_failure(ParallelRun& run, Links& links, const std::string& what) {
  {
    std::lock_guard<std::mutex> lock(run.error_mutex);
    if (run.first_error) return;
    run.first_error = std::current_exception();
  }
  links.cancel();
  run.transport->report_failure(what);
}

void Pipeline::run_parallel(std::function<void(int)> job) {
  if (abandoned_) {
    throw std::logic_error("the pipeline was abandoned after a step timed out");
  }
  links_->reset();
  auto run = std::make_shared<ParallelRun>();
  run->job = std::move(job);
  run->transport = transport_;
  Links* links = links_.get();
  std::vector<std::future<void>> done;
  for (int s : local_stages_) stages_[s]->note_randomness();  // idle: its worker waits for a job
  for (size_t w = 0; w < local_stages_.size(); ++w) {
    const int s = local_stages_[w];
    done.push_back(workers_[w]->submit([run, links, s] {
      try {
        run->job(s);
      } catch (const ChannelCancelled&) {
        // A neighbour failed; its error is the one to report.
      } catch (const std::exception& error) {
        // The stage's own errors already begin with "stage N"; others get it.
        const std::string what = error_summary(error);
        const std::string stage = fmt::format("stage {}", s);
        record_failure(*run, *links,
                       what.rfind(stage, 0) == 0 ? what : fmt::format("{}: {}", stage, what));
      } catch (...) {
        record_failure(*run, *links, fmt::format("stage {}: unknown error", s));
      }
    }));
  }
  wait_for_stages(done);
  for (auto& d : done) d.get();
  std::exception_ptr first_error;
  {
    std::lock_guard<std::mutex> lock(run->error_mutex);
    first_error = run->first_error;
  }
  if (first_error) {
    for (int s : local_stages_) stages_[s]->clear();
    std::rethrow_exception(first_error);
  }
}

// What every stage of one training step reads (and the losses the last one writes).
// Everything a stage reads during the step is here or in objects an abandoned pipeline leaves
// alive (stages, mailboxes, activity): a stage still running after a timeout never touches the
// Pipeline object itself, which its owner may destroy.
struct Pipeline::StepWork {
  std::vector<Batch> inputs;    // micro-batches
  std::vector<Batch> targets;   // their targets
  std::vector<double> weights;  // each micro-batch's share of the mini-batch
  LossFn loss_fn;
  std::vector<double> losses;  // weighted, per micro-batch
  // The one clock origin of the step's timeline: actions of different stages compare.
  Clock::time_point origin;
  std::vector<Timeline> timelines;           // per stage
  std::vector<std::vector<Action>> actions;  // the schedule's, per stage
  std::vector<char> splits;                  // Schedule::splits, per stage
  // [stage][k]: the position of actions[stage][k] in its device's order, for DeviceTurns; empty
  // with one stage per device.
  std::vector<std::vector<int>> turn;
  int devices = 0;
  PipelineOptions options;
  uint64_t step = 0;
  std::vector<Stage*> stages;
  Links* links = nullptr;
  std::atomic<uint64_t>* activity = nullptr;
};

void Pipeline::wait_for_stages(std::vector<std::future<void>>& done) {
  if (options_.step_timeout_s <= 0) return;
  const auto seconds = [](double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  auto deadline = Clock::now() + seconds(options_.step_timeout_s);
  bool extended = false;
  for (size_t w = 0; w < done.size(); ++w) {
    if (done[w].wait_until(deadline) == std::future_status::ready) continue;
    // Name the stages still computing (the others wait for them), then let every stage stop.
    std::vector<std::string> running;
    for (size_t r = w; r < done.size(); ++r) {
      if (done[r].wait_for(std::chrono::seconds(0)) == std::future_status::ready) continue;
      const int s = local_stages_[r];
      const uint64_t now = activity_[s].load();
      if (now == 0) continue;  // waiting for a message, or between actions
      running.push_back(fmt::format("stage {} ({} of micro-batch {})", s,
                                    action_name(static_cast<ActionKind>((now >> 32) - 1)),
                                    static_cast<uint32_t>(now)));
    }
    if (running.empty() && transport_->remote() && !extended) {
      // Every stage here waits for another process, whose own timeout names the stage that
      // hangs: give its report time to arrive (it ends the waits here with that error).
      extended = true;
      deadline = Clock::now() + seconds(std::min(options_.step_timeout_s, 5.0));
      --w;
      continue;
    }
    if (running.empty()) running.push_back("no stage computing (a stage waits for a message)");
    links_->cancel();
    abandoned_ = true;
    const std::string message =
        fmt::format("the step took longer than {:g} s (--timeout); still running: {}",
                    options_.step_timeout_s, fmt::join(running, ", "));
    transport_->report_failure(message);
    throw StepTimeout(message);
  }
}

void Pipeline::run_stage(int s, StepWork& work, Timeline& timeline) {
  Stage& stage = *work.stages[s];
  const bool last = s + 1 == static_cast<int>(work.stages.size());
  const PipelineOptions& options = work.options;
  const bool split = work.splits[s] != 0;  // B here, W in a later action
  Links& links = *work.links;
  const Clock::time_point step_start = work.origin;
  CurrentStream on_stage_stream(stage.stream());
  auto receive = [&](Parcel parcel) {
    return unpack(std::move(parcel), stage.device(), stage.stream());
  };
  Timeline own;
  std::atomic<uint64_t>& activity = work.activity[s];
  DeviceTurns* turns = links.turns.get();
  const int device = s % work.devices;
  expect_inputs(work.actions[s], s > 0 ? links.forward[s - 1].get() : nullptr,
                last ? nullptr : links.backward[s].get());
  for (size_t k = 0; k < work.actions[s].size(); ++k) {
    const Action& action = work.actions[s][k];
    const int i = action.micro_batch;
    activity = 0;  // waiting for its turn and its input
    if (turns) turns->wait(device, work.turn[s][k]);
    Batch incoming;
    if (action.kind == ActionKind::kForward) {
      incoming = receive(s == 0 ? Parcel(work.inputs[i]) : links.forward[s - 1]->take(i));
    } else if (action.kind == ActionKind::kBackward && !last) {
      incoming = receive(links.backward[s]->take(i));
    }
    activity = computing(action.kind, i);
    const double start = ms_since(step_start);
    Batch outgoing;
    switch (action.kind) {
      case ActionKind::kForward: {
        Stage::ForwardMode mode;
        mode.checkpointed = is_checkpointed(options.checkpoint, i, options.chunks);
        mode.track_input_grad = s > 0;
        mode.rng_seed = mix(mix(mix(options.seed ^ work.step) + s) + options.first_micro_batch + i);
        outgoing = stage.forward(i, std::move(incoming), mode);
        break;
      }
      case ActionKind::kRecompute:
        stage.recompute(i);
        break;
      case ActionKind::kBackward:
        if (last) {
          outgoing = stage.backward_from_loss(i, work.targets[i].value(), work.loss_fn,
                                              work.weights[i], &work.losses[i], split);
          if (options.check_finite && !std::isfinite(work.losses[i])) {
            throw std::runtime_error(fmt::format("stage {}, micro-batch {}: non-finite loss ({})",
                                                 s, i, work.losses[i]));
          }
        } else {
          outgoing = stage.backward(i, std::move(incoming), split);
        }
        break;
      case ActionKind::kWeight:
        stage.weight(i);
        break;
    }
    // On an accelerator the times are when the stage issued the action (its stream runs it
    // later); the step's end waits for every stream.
    own.push_back({s, action, start, ms_since(step_start)});
    if (action.kind == ActionKind::kForward && !last)
      links.forward[s]->post(i, pack(std::move(outgoing), stage.stream()));
    if (action.kind == ActionKind::kBackward && s > 0)
      links.backward[s - 1]->post(i, pack(std::move(outgoing), stage.stream()));
    if (turns) turns->pass(device);
  }
  activity = 0;
  if (!last) links.forward[s]->flush();
  if (s > 0) links.backward[s - 1]->flush();
  synchronize(stage.stream());  // gradients are complete when step() returns
  timeline = std::move(own);
}

std::vector<BatchNormImpl*> Pipeline::batch_norms(bool local_only) const {
  std::vector<BatchNormImpl*> norms;
  size_t first = 0;
  for (size_t s = 0; s < balance_.size(); ++s) {
    const size_t end = first + static_cast<size_t>(balance_[s]);
    for (size_t l = first; l < end && (stages_[s] || !local_only); ++l) {
      const auto* layer = dynamic_cast<const ModuleLayer*>(&layers_[l]);
      if (layer == nullptr) continue;
      for (const auto& module : layer->module().modules()) {
        if (auto* bn = module->as<BatchNormImpl>()) norms.push_back(bn);
      }
    }
    first = end;
  }
  return norms;
}

void Pipeline::set_deferred_batch_norm(bool on, bool commit) {
  for (BatchNormImpl* bn : batch_norms(/*local_only=*/false)) {
    if (commit) bn->commit();
    bn->set_deferred(on);
  }
}

void Pipeline::sum_batch_norm_statistics() {
  const std::vector<BatchNormImpl*> norms = batch_norms(/*local_only=*/true);
  if (norms.empty()) return;  // alike on every replica: they hold the same stages
  std::vector<at::Tensor> pending;
  for (const BatchNormImpl* bn : norms) pending.push_back(bn->pending_statistics());
  at::Tensor all = at::cat(pending).cpu();  // a process's stages share its device
  options_.sum_over_replicas(all);
  int64_t offset = 0;
  for (size_t i = 0; i < norms.size(); ++i) {
    norms[i]->set_pending_statistics(all.narrow(0, offset, pending[i].numel()));
    offset += pending[i].numel();
  }
}

StepResult Pipeline::step(const Batch& input, const at::Tensor& target, const LossFn& loss_fn) {
  const Clock::time_point start = Clock::now();
  // On the heap, shared with the stages' jobs: see ParallelRun.
  const auto shared_work = std::make_shared<StepWork>();
  StepWork& work = *shared_work;
  work.inputs = scatter(input, options_.chunks);
  if (!target.defined() || target.dim() == 0 || target.size(0) != input.size()) {
    throw std::invalid_argument(
        fmt::format("target has {} samples, the input {}",
                    target.defined() && target.dim() > 0 ? target.size(0) : 0, input.size()));
  }
  work.targets = scatter(Batch(target), options_.chunks);
  for (const auto& part : work.inputs) {
    work.weights.push_back(double(part.size()) / double(input.size()));
  }
  work.loss_fn = loss_fn;
  work.actions = schedule_.actions;
  for (int s = 0; s < schedule_.stages; ++s) work.splits.push_back(schedule_.splits(s));
  work.devices = schedule_.devices();
  work.turn = turn_;
  work.options = options_;
  work.step = steps_;
  for (auto& stage : stages_) work.stages.push_back(stage.get());
  work.links = links_.get();
  work.activity = activity_.get();
  work.losses.assign(options_.chunks, 0.0);
  work.timelines.resize(stages());
  if (options_.deferred_batch_norm) set_deferred_batch_norm(true, false);
  try {
    work.origin = Clock::now();
    run_parallel([shared_work](int s) { run_stage(s, *shared_work, shared_work->timelines[s]); });
    transport_->share_losses(work.losses, stages() - 1);
    if (options_.deferred_batch_norm && options_.sum_over_replicas) sum_batch_norm_statistics();
  } catch (...) {
    if (options_.deferred_batch_norm) set_deferred_batch_norm(false, false);
    ++steps_;
    throw;
  }
  if (options_.deferred_batch_norm) set_deferred_batch_norm(false, true);
  ++steps_;

  StepResult result;
  result.loss = std::accumulate(work.losses.begin(), work.losses.end(), 0.0);
  for (auto& t : work.timelines) {
    result.timeline.insert(result.timeline.end(), t.begin(), t.end());
  }
  result.step_ms = ms_since(start);
  result.origin_ms =
      std::chrono::duration<double, std::milli>(work.origin.time_since_epoch()).count() +
      transport_->clock_offset_ms();
  return result;
}

Batch Pipeline::forward(const Batch& input) {
  // On the heap, shared with the stages' jobs, touching nothing of the Pipeline object itself:
  // see StepWork.
  struct Work {
    std::vector<Batch> inputs, outputs;
    std::vector<Stage*> stages;
    Links* links = nullptr;
    std::atomic<uint64_t>* activity = nullptr;
  };
  const auto work = std::make_shared<Work>();
  work->inputs = scatter(input, options_.chunks);
  work->outputs.resize(work->inputs.size());
  for (auto& stage : stages_) work->stages.push_back(stage.get());
  work->links = links_.get();
  work->activity = activity_.get();
  run_parallel([work](int s) {
    torch::NoGradGuard no_grad;  // grad mode is per thread
    Stage& stage = *work->stages[s];
    CurrentStream on_stage_stream(stage.stream());
    const int stages = static_cast<int>(work->stages.size());
    if (s > 0) {
      std::vector<int> micro_batches(work->inputs.size());
      std::iota(micro_batches.begin(), micro_batches.end(), 0);
      work->links->forward[s - 1]->expect(micro_batches);
    }
    for (size_t i = 0; i < work->inputs.size(); ++i) {
      work->activity[s] = 0;  // waiting for its input
      Parcel in = s == 0 ? Parcel(work->inputs[i]) : work->links->forward[s - 1]->take(int(i));
      work->activity[s] = computing(ActionKind::kForward, int(i));
      Batch out = stage.infer(unpack(std::move(in), stage.device(), stage.stream()));
      if (s + 1 < stages) {
        work->links->forward[s]->post(int(i), pack(std::move(out), stage.stream()));
      } else {
        work->outputs[i] = std::move(out);
      }
    }
    work->activity[s] = 0;
    if (s + 1 < stages) work->links->forward[s]->flush();
    synchronize(stage.stream());  // the caller reads the outputs on its own stream
  });
  if (!runs_stage(stages() - 1)) return Batch();
  return gather(work->outputs);
}

}  // namespace pipebal::pipeline
