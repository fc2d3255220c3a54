// See pipeline.h.
#include "pipebal/pipeline/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <mutex>
#include <numeric>
#include <stdexcept>

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "pipebal/common/cores.h"
#include "pipebal/common/thread_pinning.h"
#include "pipebal/common/time_limit.h"
#include "pipebal/pipeline/error_text.h"
#include "pipebal/pipeline/stage_turner.h"
#include "pipebal/pipeline/transfer.h"
#include "pipebal/pipeline/worker.h"

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

// Channels between neighbouring stages: forward[s] carries stage s's outputs to stage s+1,
// backward[s] carries stage s+1's input gradients to stage s. Only those with a stage of this
// process at one end exist.
struct Pipeline::Links {
  std::vector<std::unique_ptr<Channel>> forward;
  std::vector<std::unique_ptr<Channel>> backward;
  std::atomic<bool> cancelled{false};

  Links(Transport& transport, const std::vector<std::unique_ptr<Stage>>& stages) {
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
    cancelled = true;
    for_each([](Channel& c) { c.cancel(); });
  }
  void reset() {
    for_each([](Channel& c) { c.reset(); });
    cancelled = false;
  }
};

void check_threads_per_stage(int threads) {
  const int cores = usable_cores();
  if (threads < 1 || threads > cores) {
    throw std::invalid_argument(fmt::format("threads per stage must be between 1 and {}, got {}",
                                            usable_cores_text(), threads));
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
  if (!options_.stage_cpus.empty() && static_cast<int>(options_.stage_cpus.size()) != stages) {
    throw std::invalid_argument(
        fmt::format("CPUs given for {} stages of {}", options_.stage_cpus.size(), stages));
  }
  if (stages > kMaxStages) {
    throw std::invalid_argument(
        fmt::format("{} stages: at most {} in one process", stages, kMaxStages));
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
  // A device's stages (interleaved: d, d + devices, ...) run on its one thread, so on one device.
  for (const auto& device_order : schedule_.device_order) {
    const int first = device_order.front().stage;
    for (const DeviceStep& step : device_order) {
      const int s = step.stage;
      const std::vector<std::vector<int>>& cpus = options_.stage_cpus;
      const bool same_cpus = cpus.empty() || cpus[s] == cpus[first];
      if (devices[s] == devices[first] && same_cpus) continue;
      throw std::invalid_argument(fmt::format(
          "stages {} and {} run on one device's thread ({} stages per device) but were given {}: "
          "give every stage of a device the same {}",
          first, s, options_.virtual_stages,
          devices[s] != devices[first]
              ? fmt::format("devices {} and {}", devices[first].str(), devices[s].str())
              : fmt::format("CPUs {} and {}", fmt::join(cpus[first], ","), fmt::join(cpus[s], ",")),
          devices[s] != devices[first] ? "one" : "ones"));
    }
  }
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
  links_ = std::make_unique<Links>(*transport_, stages_);
  activity_ = std::make_unique<std::atomic<uint64_t>[]>(stages);
  for (int s = 0; s < stages; ++s) activity_[s] = 0;
  // One worker per device with stages here, running them in the device's order.
  auto plans = std::make_shared<std::vector<WorkerPlan>>();
  worker_of_.assign(stages, -1);
  for (const auto& device_order : schedule_.device_order) {
    WorkerPlan plan;
    for (const DeviceStep& step : device_order) {
      if (!stages_[step.stage]) continue;
      plan.order.push_back(step);
      if (worker_of_[step.stage] >= 0) continue;
      worker_of_[step.stage] = static_cast<int>(plans->size());
      plan.stages.push_back(step.stage);
    }
    if (plan.stages.empty()) continue;
    std::sort(plan.stages.begin(), plan.stages.end());
    plans->push_back(std::move(plan));
  }
  plans_ = plans;
  const int threads = options_.threads_per_stage;
  for (const WorkerPlan& plan : *plans_) {
    std::vector<int> cpus;
    if (!options_.stage_cpus.empty()) cpus = options_.stage_cpus[plan.stages.front()];
    workers_.push_back(std::make_unique<Worker>(
        [threads, cpus, stages = plan.stages, enter = options_.on_stage_enter] {
          // Pinned before its intra-op pool exists, whose threads inherit the CPUs.
          if (!cpus.empty()) pin_this_thread(cpus);
          // Initialise this thread's intra-op settings first, so that ATen's lazy per-thread
          // initialisation cannot later reset them to the process-wide value.
          at::internal::lazy_init_num_threads();
          at::set_num_threads(threads);
          if (enter) {
            for (int s : stages) enter(s);
          }
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
  const size_t w = static_cast<size_t>(worker_of_[s]);
  const bool several = (*plans_)[w].stages.size() > 1;
  workers_[w]
      ->submit([&job, s, several, enter = options_.on_stage_enter] {
        if (several && enter) enter(s);
        job();
      })
      .get();
}

// One run of a job on every worker. Held by the jobs themselves, so that a stage still running
// after a timeout never touches freed memory.
struct Pipeline::ParallelRun {
  std::function<void(size_t, int&)> job;
  std::shared_ptr<Transport> transport;
  std::mutex error_mutex;
  std::exception_ptr first_error;
};

// The first failure of a run is the one its step throws; every local channel is cancelled and
// the other processes are told.
void Pipeline::record_failure(ParallelRun& run, Links& links, const std::string& what,
                              std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(run.error_mutex);
    if (run.first_error) return;
    run.first_error = std::move(error);
  }
  links.cancel();
  run.transport->report_failure(what);
}

void Pipeline::run_parallel(std::function<void(size_t, int&)> job) {
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
  for (size_t w = 0; w < workers_.size(); ++w) {
    done.push_back(workers_[w]->submit([run, links, w, first = (*plans_)[w].stages.front()] {
      int s = first;
      try {
        run->job(w, s);
      } catch (const ChannelCancelled&) {
        // A neighbour failed; its error is the one to report.
      } catch (const std::exception& error) {
        // The stage's own errors already begin with "stage N"; others get it in the message the
        // other processes are told. The step rethrows a runtime_error (the stage's own, another
        // process's failure) or logic_error (a bug; invalid_argument: bad input) as it is, for
        // its type; anything else (LibTorch's c10::Error, bad_alloc) as a runtime_error naming
        // the stage.
        const std::string what = error_summary(error);
        const std::string stage = fmt::format("stage {}", s);
        const std::string message =
            what.rfind(stage, 0) == 0 ? what : fmt::format("{}: {}", stage, what);
        const bool typed = dynamic_cast<const std::runtime_error*>(&error) != nullptr ||
                           dynamic_cast<const std::logic_error*>(&error) != nullptr;
        record_failure(*run, *links, message,
                       typed ? std::current_exception()
                             : std::make_exception_ptr(std::runtime_error(message)));
      } catch (...) {
        const std::string message = fmt::format("stage {}: unknown error", s);
        record_failure(*run, *links, message, std::make_exception_ptr(std::runtime_error(message)));
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
  std::shared_ptr<const std::vector<WorkerPlan>> plans;
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
      for (int s : (*plans_)[r].stages) {
        const uint64_t now = activity_[s].load();
        if (now == 0) continue;  // waiting for a message, or between actions
        running.push_back(fmt::format("stage {} ({} of micro-batch {})", s,
                                      action_name(static_cast<ActionKind>((now >> 32) - 1)),
                                      static_cast<uint32_t>(now)));
      }
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

// One worker's part of a step: its stages' actions in their device's order, one at a time.
void Pipeline::run_worker(const WorkerPlan& plan, StepWork& work, int& current) {
  Links& links = *work.links;
  const int stages = static_cast<int>(work.stages.size());
  StageTurner turn(work.options.on_stage_enter, plan.stages.size() > 1, links.cancelled, current);
  for (int s : plan.stages) {
    turn.to(s);            // a channel may allocate its receive buffers here
    work.activity[s] = 0;  // waiting (a failed step may have left an action's word)
    CurrentStream on_stage_stream(work.stages[s]->stream());
    expect_inputs(work.actions[s], s > 0 ? links.forward[s - 1].get() : nullptr,
                  s + 1 < stages ? links.backward[s].get() : nullptr);
  }
  for (const DeviceStep& next : plan.order) {
    turn.to(next.stage);
    run_action(next.stage, work.actions[next.stage][next.index], work);
  }
  for (int s : plan.stages) {
    turn.to(s);
    CurrentStream on_stage_stream(work.stages[s]->stream());  // a send may wait on the stream
    if (s + 1 < stages) links.forward[s]->flush();
    if (s > 0) links.backward[s - 1]->flush();
    synchronize(work.stages[s]->stream());  // gradients are complete when step() returns
  }
}

void Pipeline::run_action(int s, const Action& action, StepWork& work) {
  Stage& stage = *work.stages[s];
  const bool last = s + 1 == static_cast<int>(work.stages.size());
  const PipelineOptions& options = work.options;
  const bool split = work.splits[s] != 0;  // B here, W in a later action
  Links& links = *work.links;
  CurrentStream on_stage_stream(stage.stream());
  auto receive = [&](Parcel parcel) {
    return unpack(std::move(parcel), stage.device(), stage.stream());
  };
  std::atomic<uint64_t>& activity = work.activity[s];
  const int i = action.micro_batch;
  Batch incoming;
  if (action.kind == ActionKind::kForward) {
    incoming = receive(s == 0 ? Parcel(work.inputs[i]) : links.forward[s - 1]->take(i));
  } else if (action.kind == ActionKind::kBackward && !last) {
    incoming = receive(links.backward[s]->take(i));
  }
  activity = computing(action.kind, i);
  const double start = ms_since(work.origin);
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
          // fmt says "-nan" for some NaNs: "nan" for all.
          throw std::runtime_error(
              fmt::format("stage {}, micro-batch {}: non-finite loss ({})", s, i,
                          std::isnan(work.losses[i]) ? "nan" : fmt::format("{}", work.losses[i])));
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
  work.timelines[s].push_back({s, action, start, ms_since(work.origin)});
  activity = 0;  // posting, then waiting for its next input
  if (action.kind == ActionKind::kForward && !last)
    links.forward[s]->post(i, pack(std::move(outgoing), stage.stream()));
  if (action.kind == ActionKind::kBackward && s > 0)
    links.backward[s - 1]->post(i, pack(std::move(outgoing), stage.stream()));
}

StepResult Pipeline::step(const Batch& input, const at::Tensor& target, const LossFn& loss_fn,
                          const LossTerms& loss_terms) {
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
  // A micro-batch's loss is a mean over its own terms: weighted by its share of the mini-batch's,
  // they add up to the mean over the mini-batch. With none (every class id of the mini-batch, or
  // of a replica's slice of it, ignored) each weighs 0: the step adds nothing, where one pass's
  // mean of nothing would be NaN.
  std::vector<double> terms;
  for (size_t i = 0; i < work.inputs.size(); ++i) {
    terms.push_back(loss_terms ? double(loss_terms(work.targets[i].value()))
                               : double(work.inputs[i].size()));
  }
  const double total = std::accumulate(terms.begin(), terms.end(), 0.0);
  for (const double t : terms) work.weights.push_back(total > 0 ? t / total : 0.0);
  work.loss_fn = loss_fn;
  work.actions = schedule_.actions;
  for (int s = 0; s < schedule_.stages; ++s) work.splits.push_back(schedule_.splits(s));
  work.plans = plans_;
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
    run_parallel([shared_work](size_t w, int& current) {
      run_worker((*shared_work->plans)[w], *shared_work, current);
    });
    transport_->share_losses(work.losses, stages() - 1);
    if (options_.deferred_batch_norm && options_.sum_over_replicas) sum_batch_norm_statistics();
  } catch (...) {
    // After a timeout a stage may still be inside a batch norm: its sums are left to it (the
    // pipeline is abandoned); otherwise every stage has stopped, and the failed step's sums go.
    if (options_.deferred_batch_norm && !abandoned_) set_deferred_batch_norm(false, false);
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
    std::shared_ptr<const std::vector<WorkerPlan>> plans;
    std::function<void(int)> enter;
    Links* links = nullptr;
    std::atomic<uint64_t>* activity = nullptr;
  };
  const auto work = std::make_shared<Work>();
  work->inputs = scatter(input, options_.chunks);
  work->outputs.resize(work->inputs.size());
  for (auto& stage : stages_) work->stages.push_back(stage.get());
  work->plans = plans_;
  work->enter = options_.on_stage_enter;
  work->links = links_.get();
  work->activity = activity_.get();
  run_parallel([work](size_t w, int& current) {
    torch::NoGradGuard no_grad;  // grad mode is per thread
    const std::vector<int>& own = (*work->plans)[w].stages;
    const int stages = static_cast<int>(work->stages.size());
    const int micro_batches = static_cast<int>(work->inputs.size());
    std::vector<int> all(static_cast<size_t>(micro_batches));
    std::iota(all.begin(), all.end(), 0);
    // (micro-batch, stage) in wavefront order, micro-batch + stage ascending: an order of all
    // stages' forwards in which each comes after the one it takes its input from, so a worker
    // running its stages' part of it never waits for one it has yet to run.
    StageTurner turn(work->enter, own.size() > 1, work->links->cancelled, current);
    std::vector<std::pair<int, int>> order;
    for (int s : own) {
      turn.to(s);
      work->activity[s] = 0;
      CurrentStream on_stage_stream(work->stages[s]->stream());
      if (s > 0) work->links->forward[s - 1]->expect(all);
      for (int i = 0; i < micro_batches; ++i) order.emplace_back(i, s);
    }
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
      return std::make_pair(a.first + a.second, a.second) <
             std::make_pair(b.first + b.second, b.second);
    });
    for (const auto& [i, s] : order) {
      turn.to(s);
      Stage& stage = *work->stages[s];
      CurrentStream on_stage_stream(stage.stream());
      Parcel in = s == 0 ? Parcel(work->inputs[i]) : work->links->forward[s - 1]->take(i);
      work->activity[s] = computing(ActionKind::kForward, i);
      Batch out = stage.infer(i, unpack(std::move(in), stage.device(), stage.stream()));
      work->activity[s] = 0;
      if (s + 1 < stages) {
        work->links->forward[s]->post(i, pack(std::move(out), stage.stream()));
      } else {
        work->outputs[i] = std::move(out);
      }
    }
    for (int s : own) {
      turn.to(s);
      CurrentStream on_stage_stream(work->stages[s]->stream());
      if (s + 1 < stages) work->links->forward[s]->flush();
      synchronize(work->stages[s]->stream());  // the caller reads the outputs on its own stream
    }
  });
  if (!runs_stage(stages() - 1)) return Batch();
  return gather(work->outputs);
}

}  // namespace pipebal::pipeline
