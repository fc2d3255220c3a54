// workflow::TrainingRun: its rehearsal (what run_interleaved turns on) leaves the training as it
// was, and it does run; a stage's memory counts its weights; the constructing thread gives the
// cores to the stages while a run lives; run_interleaved calls back after each round of measured
// steps.
#include "workflow/training_run.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

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

// Every round steps every run once; over a period (n rounds, 2n when n is odd) each run goes
// first equally often and each run directly follows each other run equally often.
TEST(TurnOrder, EachRunGoesFirstAndFollowsEveryOtherEquallyOften) {
  EXPECT_EQ(turn_order(0, 4), (std::vector<size_t>{0, 1, 3, 2}));
  EXPECT_EQ(turn_order(1, 4), (std::vector<size_t>{1, 2, 0, 3}));
  EXPECT_EQ(turn_order(4, 4), turn_order(0, 4));
  EXPECT_EQ(turn_order(7, 1), (std::vector<size_t>{0}));
  EXPECT_TRUE(turn_order(4, 0).empty());
  for (size_t n = 2; n <= 7; ++n) {
    const int period = static_cast<int>(n % 2 == 0 ? n : 2 * n);
    std::map<size_t, int> first;
    std::map<std::pair<size_t, size_t>, int> follows;
    for (int round = 0; round < period; ++round) {
      std::vector<size_t> order = turn_order(round, n);
      ++first[order.front()];
      for (size_t i = 1; i < n; ++i) ++follows[{order[i - 1], order[i]}];
      std::sort(order.begin(), order.end());
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(order[i], i) << "round " << round << " of " << n;
    }
    ASSERT_EQ(first.size(), n);
    for (const auto& [run, count] : first) EXPECT_EQ(count, period / static_cast<int>(n)) << n;
    ASSERT_EQ(follows.size(), n * (n - 1)) << n;
    const int each = period * static_cast<int>(n - 1) / static_cast<int>(n * (n - 1));
    for (const auto& [pair, count] : follows) EXPECT_EQ(count, each) << n;
  }
}

TEST(RunInterleaved, CallsBackAfterEachRoundOfMeasuredStepsOnly) {
  TrainSettings three = two_stages("mlp:layers=3,width=16", {16, 16}, {2, 2});
  TrainSettings five = three;
  five.steps = 5;
  five.warmup_steps = 2;
  std::vector<int> rounds;
  const std::vector<reports::RunRecord> runs =
      run_interleaved({three, five}, [&rounds](int round) { rounds.push_back(round); });
  // One call per round while any run still steps, none during the warm-up.
  EXPECT_EQ(rounds, (std::vector<int>{0, 1, 2, 3, 4}));
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].steps.size(), 3u);
  EXPECT_EQ(runs[1].steps.size(), 5u);
}

}  // namespace
}  // namespace pipebal::workflow
