// workflow::TrainingRun: its rehearsal (what run_interleaved turns on) leaves the training as it
// was, and it does run; a stage's memory counts its weights; the constructing thread gives the
// cores to the stages while a run lives, also with several runs alive at once; each device's
// stages run on the CPUs given it.
#include "pipebal/workflow/training_run.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "pipebal/common/cores.h"
#include "pipebal/workflow/interleaved_runs.h"

namespace pipebal::workflow {
namespace {

std::vector<double> losses(const reports::RunRecord& run) {
  std::vector<double> values;
  for (const reports::StepSample& step : run.steps) values.push_back(step.loss);
  return values;
}

TrainSettings two_stages(const std::string& model, std::vector<int64_t> shape,
                         std::vector<int> balance) {
  TrainSettings s;
  s.model = model;
  s.input_shape = std::move(shape);
  s.balance = std::move(balance);
  s.chunks = 2;
  s.schedule = pipeline::ScheduleKind::kOneFOneB;
  s.steps = 3;
  s.warmup_steps = 1;
  return s;
}

TEST(Rehearsal, LeavesEveryStepsLossAsWithout) {
  // Without dropout a rehearsal is invisible: no update and no gradient survives it, so every
  // step (whose loss depends on all the updates before it) is the same.
  TrainSettings plain = two_stages("mlp:layers=3,width=16", {16, 16}, {2, 2});
  TrainSettings rehearsed = plain;
  rehearsed.rehearse = true;
  const std::vector<double> expected = losses(run_training(plain));
  ASSERT_EQ(expected.size(), 3u);
  EXPECT_EQ(losses(run_training(rehearsed)), expected);
}

TEST(Rehearsal, RunsBeforeEveryMeasuredStep) {
  // With dropout, masks are drawn per step of the pipeline: a rehearsal takes a step's masks, so
  // the measured steps draw others and their losses differ from a run without rehearsals.
  const std::string gpt = "gpt:layers=1,dim=16,heads=2,seq=8,vocab=32,dropout=50";
  TrainSettings plain = two_stages(gpt, {4, 8}, {2, 2});
  TrainSettings rehearsed = plain;
  rehearsed.rehearse = true;
  const std::vector<double> without = losses(run_training(plain));
  const std::vector<double> with = losses(run_training(rehearsed));
  ASSERT_EQ(with.size(), without.size());
  for (size_t k = 0; k < with.size(); ++k) EXPECT_NE(with[k], without[k]) << "step " << k;
  EXPECT_EQ(losses(run_training(rehearsed)), with) << "and it is deterministic";
}

// A stage's memory includes its weights, though they were made with the model before counting
// began: with a batch of 2, each stage peaks at its parameters, their gradients and a second
// micro-batch's new gradients before they are added to those, and little more (activations of
// 8 KiB).
TEST(TrainingRun, AStagesMemoryHoldsItsWeightsAndTheirGradients) {
  const reports::RunRecord run =
      run_training(two_stages("mlp:layers=2,width=1024", {2, 1024}, {1, 2}));
  const int64_t hidden = (1024 * 1024 + 1024) * 4;  // a 1024 x 1024 layer's weight and bias
  const int64_t head = (10 * 1024 + 10) * 4;        // 10 classes
  const int64_t slack = 256 << 10;
  ASSERT_EQ(run.stages.size(), 2u);
  EXPECT_GE(run.stages[0].peak_memory_bytes, 3 * hidden);
  EXPECT_LT(run.stages[0].peak_memory_bytes, 3 * hidden + slack);
  EXPECT_GE(run.stages[1].peak_memory_bytes, 2 * (hidden + head) + hidden);
  EXPECT_LT(run.stages[1].peak_memory_bytes, 2 * (hidden + head) + hidden + slack);
}

TEST(TrainingRun, TheConstructingThreadRunsOneIntraOpThreadWhileTheRunLives) {
  at::set_num_threads(2);
  TrainSettings settings = two_stages("mlp:layers=3,width=16", {16, 16}, {2, 2});
  settings.threads_per_stage = 2;
  {
    TrainingRun run(settings);
    EXPECT_EQ(at::get_num_threads(), 1);
    while (!run.done()) run.step();
    EXPECT_EQ(at::get_num_threads(), 1);
  }
  EXPECT_EQ(at::get_num_threads(), 2) << "given back";
  // Several runs alive at once give back the count the first one found.
  run_interleaved({settings, settings, settings});
  EXPECT_EQ(at::get_num_threads(), 2);
  // And a run that cannot be made gives it back too.
  settings.balance = {2, 3};
  EXPECT_THROW(TrainingRun{settings}, std::invalid_argument);
  EXPECT_EQ(at::get_num_threads(), 2);
}

// Each device's stage thread runs on the CPUs given the device: interleaved, stages d and
// d + devices on device d's. A list per device that the balance does not make is refused.
TEST(TrainingRun, EachDevicesStagesRunOnTheCpusGivenTheDevice) {
  const std::vector<int> cpus = allowed_cpus();
  TrainSettings settings = two_stages("mlp:layers=3,width=16", {16, 16}, {1, 1, 1, 1});
  settings.schedule = pipeline::ScheduleKind::kInterleaved;
  settings.virtual_stages = 2;
  settings.device_cpus = {{cpus.back()}, {cpus.front()}};
  TrainingRun run(settings);
  for (int stage = 0; stage < 4; ++stage) {
    std::vector<int> seen;
    run.run_on_stage_thread(stage, [&] { seen = this_thread_cpus(); });
    EXPECT_EQ(seen, settings.device_cpus[static_cast<size_t>(stage % 2)]) << "stage " << stage;
  }
  while (!run.done()) run.step();
  settings.device_cpus = {{cpus.front()}};
  EXPECT_THROW(TrainingRun{settings}, std::invalid_argument);
}

}  // namespace
}  // namespace pipebal::workflow
