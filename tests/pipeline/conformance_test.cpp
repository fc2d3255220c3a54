// The engine executes exactly the schedule the simulator walks. For every schedule and
// checkpoint mode, 2-4 stages and 1-8 micro-batches (interleaved: 2-3 devices of 2-3 stages), on
// layers whose forward sleeps a known time: each stage's measured actions come in the order of
// schedule.actions[s], each device's in the order of schedule.device_order[d], every
// cross-stage dependency holds on the measured clock, and the measured step is never shorter
// than simulate()'s on the slept times (sleeping takes at least that long, so this lower bound
// holds on any machine; how close the two come is a benchmark's question, not a test's).
#include <algorithm>
#include <chrono>
#include <map>
#include <thread>
#include <tuple>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "pipebal/balance/simulator.h"
#include "pipebal/pipeline/module_layer.h"
#include "pipebal/pipeline/pipeline.h"

namespace pipebal::pipeline {
namespace {

namespace nn = torch::nn;

constexpr double kForwardMs = 0.3;

// A Linear whose forward also sleeps kForwardMs (recomputation sleeps again).
struct SleepyLinearImpl : nn::Cloneable<SleepyLinearImpl> {
  SleepyLinearImpl() { reset(); }
  void reset() override { fc = register_module("fc", nn::Linear(4, 4)); }
  at::Tensor forward(const at::Tensor& x) {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(kForwardMs));
    return fc->forward(x);
  }
  nn::Linear fc{nullptr};
};
TORCH_MODULE(SleepyLinear);

}  // namespace

void PrintTo(const Action& action, std::ostream* os) {
  *os << to_string(action.kind) << action.micro_batch;
}

void PrintTo(const DeviceStep& step, std::ostream* os) {
  *os << "stage " << step.stage << " #" << step.index;
}

namespace {

at::Tensor mse(const at::Tensor& out, const at::Tensor& target) {
  return torch::mse_loss(out, target);
}

std::vector<Action> actions_of(const Timeline& timeline, int stage) {
  std::vector<Action> actions;
  for (const auto& t : timeline)
    if (t.stage == stage) actions.push_back(t.action);
  return actions;
}

void expect_dependencies(const Timeline& timeline, int stages, int chunks) {
  std::map<std::tuple<int, ActionKind, int>, TimedAction> at;
  for (const auto& t : timeline) at[{t.stage, t.action.kind, t.action.micro_batch}] = t;
  for (int s = 0; s < stages; ++s) {
    for (int i = 0; i < chunks; ++i) {
      const auto& f = at.at({s, ActionKind::kForward, i});
      const auto& b = at.at({s, ActionKind::kBackward, i});
      EXPECT_LE(f.end_ms, b.start_ms) << "F before B, stage " << s << ", micro-batch " << i;
      if (s > 0) {
        EXPECT_GE(f.start_ms, at.at({s - 1, ActionKind::kForward, i}).end_ms)
            << "F(" << s << "," << i << ") after F(" << s - 1 << "," << i << ")";
      }
      if (s + 1 < stages) {
        EXPECT_GE(b.start_ms, at.at({s + 1, ActionKind::kBackward, i}).end_ms)
            << "B(" << s << "," << i << ") after B(" << s + 1 << "," << i << ")";
      }
      const auto r = at.find({s, ActionKind::kRecompute, i});
      if (r != at.end()) {
        EXPECT_LE(f.end_ms, r->second.start_ms);
        EXPECT_LE(r->second.end_ms, b.start_ms);
      }
      const auto w = at.find({s, ActionKind::kWeight, i});
      if (w != at.end()) {
        EXPECT_LE(b.end_ms, w->second.start_ms) << "W after its B";
      }
    }
  }
}

// A device's measured actions, by start time, as (stage, index in the stage's list).
std::vector<DeviceStep> device_steps(const Timeline& timeline, const Schedule& schedule,
                                     int device) {
  std::vector<TimedAction> mine;
  for (const auto& t : timeline)
    if (schedule.device_of(t.stage) == device) mine.push_back(t);
  std::stable_sort(mine.begin(), mine.end(),
                   [](const auto& a, const auto& b) { return a.start_ms < b.start_ms; });
  std::vector<int> next(schedule.stages, 0);
  std::vector<DeviceStep> steps;
  for (const auto& t : mine) steps.push_back({t.stage, next[t.stage]++});
  return steps;
}

void run_and_compare(ScheduleKind schedule, CheckpointMode checkpoint, int stages, int chunks,
                     int virtual_stages, const std::vector<int>& weight_delays = {}) {
  SCOPED_TRACE(to_string(schedule) + ", checkpoint " + to_string(checkpoint) + ", " +
               std::to_string(stages) + " stages (" + std::to_string(virtual_stages) +
               " per device), " + std::to_string(chunks) + " micro-batches" +
               (weight_delays.empty() ? "" : ", W delay " + std::to_string(weight_delays.back())));
  torch::manual_seed(0);
  LayerSeq layers("sleepy");
  for (int l = 0; l < stages; ++l) {
    layers.add(make_layer("l" + std::to_string(l), "SleepyLinear", SleepyLinear()));
  }
  PipelineOptions options;
  options.chunks = chunks;
  options.schedule = schedule;
  options.checkpoint = checkpoint;
  options.virtual_stages = virtual_stages;
  options.weight_delays = weight_delays;
  Pipeline pipeline(layers, std::vector<int>(stages, 1), {}, options);
  const StepResult result = pipeline.step(Batch(torch::randn({12, 4})), torch::randn({12, 4}), mse);

  for (int s = 0; s < stages; ++s) {
    EXPECT_EQ(actions_of(result.timeline, s), pipeline.schedule().actions[s]) << "stage " << s;
  }
  for (int d = 0; d < pipeline.schedule().devices(); ++d) {
    EXPECT_EQ(device_steps(result.timeline, pipeline.schedule(), d),
              pipeline.schedule().device_order[d])
        << "device " << d;
  }
  expect_dependencies(result.timeline, stages, chunks);

  // Forward and recompute sleep kForwardMs; backward costs are left at 0 in the prediction, so
  // it is a lower bound of the measured step.
  const std::vector<balance::StageDurations> durations(stages, {kForwardMs, kForwardMs, 0.0});
  const balance::SimulationResult predicted =
      balance::simulate(pipeline.schedule(), durations, std::vector<double>(stages - 1, 0.0), {});
  EXPECT_GE(result.step_ms, predicted.step_ms);
}

TEST(Conformance, EngineRunsTheSimulatorsScheduleForEveryConfiguration) {
  for (auto checkpoint :
       {CheckpointMode::kAlways, CheckpointMode::kExceptLast, CheckpointMode::kNever}) {
    for (auto schedule :
         {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kZeroBubbleH1}) {
      for (int stages = 2; stages <= 4; ++stages) {
        for (int chunks = 1; chunks <= 8; ++chunks) {
          run_and_compare(schedule, checkpoint, stages, chunks, 1);
        }
      }
    }
    // zb-h1 with every backward whole, W right after B, and every W at the end.
    for (int stages = 2; stages <= 4; ++stages) {
      for (int chunks : {1, 3, 8}) {
        for (int delay : {kWholeBackward, 0, chunks}) {
          run_and_compare(ScheduleKind::kZeroBubbleH1, checkpoint, stages, chunks, 1,
                          std::vector<int>(stages, delay));
        }
      }
    }
    for (int devices = 2; devices <= 3; ++devices) {
      for (int virtual_stages = 2; virtual_stages <= 3; ++virtual_stages) {
        for (int rounds = 0; rounds <= 2; ++rounds) {  // 0: one micro-batch
          run_and_compare(ScheduleKind::kInterleaved, checkpoint, devices * virtual_stages,
                          rounds == 0 ? 1 : devices * rounds, virtual_stages);
        }
      }
    }
  }
}

}  // namespace
}  // namespace pipebal::pipeline
