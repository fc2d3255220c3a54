// Transparency: a pipelined step equals the plain model's in float64 (loss and every gradient)
// for every schedule, checkpoint mode, uneven chunks, several input tensors and skip tensors,
// and the timeline keeps the dependencies between stages, also when the cores are busy.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <thread>
#include <tuple>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "pipebal/pipeline/pipeline.h"
#include "tests/support/skip_model.h"

namespace pipebal::pipeline {
namespace {

using testing::kWidth;
using testing::make_model;
using testing::mse;
using testing::plain_step;
using testing::Reference;

struct Config {
  ScheduleKind schedule;
  CheckpointMode checkpoint;
  std::vector<int> balance;
  int chunks;
  int virtual_stages = 1;
  std::vector<int> weight_delays = {};  // zb-h1; empty: H1's
};

void PrintTo(const Config& c, std::ostream* os) {
  *os << to_string(c.schedule) << ", checkpoint " << to_string(c.checkpoint) << ", balance";
  for (int b : c.balance) *os << ' ' << b;
  *os << ", " << c.chunks << " chunks";
  if (c.virtual_stages > 1) *os << ", " << c.virtual_stages << " stages per device";
  if (!c.weight_delays.empty()) *os << ", W delays";
  for (int d : c.weight_delays) *os << ' ' << d;
}

// The stages share one clock per step: F(s+1, i) starts after F(s, i) ended and B(s, i)
// after B(s+1, i) ended, as the data they wait for dictates.
void expect_timeline_respects_dependencies(const Timeline& timeline, int stages, int chunks) {
  std::map<std::tuple<int, ActionKind, int>, TimedAction> by_key;
  for (const auto& t : timeline) by_key[{t.stage, t.action.kind, t.action.micro_batch}] = t;
  for (int s = 0; s + 1 < stages; ++s) {
    for (int i = 0; i < chunks; ++i) {
      const auto& f = by_key.at({s, ActionKind::kForward, i});
      const auto& f_next = by_key.at({s + 1, ActionKind::kForward, i});
      EXPECT_GE(f_next.start_ms, f.end_ms) << "F(" << s + 1 << "," << i << ")";
      const auto& b = by_key.at({s, ActionKind::kBackward, i});
      const auto& b_next = by_key.at({s + 1, ActionKind::kBackward, i});
      EXPECT_GE(b.start_ms, b_next.end_ms) << "B(" << s << "," << i << ")";
    }
  }
}

class Transparency : public ::testing::TestWithParam<Config> {};

TEST_P(Transparency, PipelinedStepEqualsPlainModelInFloat64) {
  const Config& c = GetParam();
  const int64_t samples = 7;  // uneven for most chunk counts
  torch::manual_seed(42);
  Batch input({torch::randn({samples, kWidth}, torch::kDouble),
               torch::randn({samples, kWidth}, torch::kDouble)});
  const at::Tensor target = torch::randn({samples, 3}, torch::kDouble);

  LayerSeq plain = make_model(1);
  const Reference ref = plain_step(plain, input, target);

  LayerSeq piped = make_model(1);
  PipelineOptions options;
  options.chunks = c.chunks;
  options.schedule = c.schedule;
  options.checkpoint = c.checkpoint;
  options.virtual_stages = c.virtual_stages;
  options.weight_delays = c.weight_delays;
  Pipeline pipeline(piped, c.balance, {}, options);
  const StepResult result = pipeline.step(input, target, mse);

  EXPECT_NEAR(result.loss, ref.loss, 1e-10 * std::abs(ref.loss));
  const auto params = piped.parameters();
  ASSERT_EQ(params.size(), ref.grads.size());
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_TRUE(params[i].grad().defined()) << "parameter " << i;
    EXPECT_TRUE(torch::allclose(params[i].grad(), ref.grads[i], 1e-10, 1e-12)) << "parameter " << i;
  }
  // Every action ran once and was timed.
  size_t actions = 0;
  for (const auto& list : pipeline.schedule().actions) actions += list.size();
  EXPECT_EQ(result.timeline.size(), actions);
  expect_timeline_respects_dependencies(result.timeline, pipeline.stages(), c.chunks);
}

std::vector<Config> transparency_configs() {
  std::vector<Config> configs;
  for (auto schedule :
       {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kZeroBubbleH1}) {
    for (auto checkpoint :
         {CheckpointMode::kAlways, CheckpointMode::kExceptLast, CheckpointMode::kNever}) {
      for (int chunks : {1, 3, 7}) {
        configs.push_back({schedule, checkpoint, {3, 3, 2}, chunks});  // skip crosses 2 boundaries
      }
      configs.push_back({schedule, checkpoint, {1, 1, 1, 1, 1, 1, 1, 1}, 4});
      configs.push_back({schedule, checkpoint, {8}, 2});
    }
  }
  for (auto checkpoint :
       {CheckpointMode::kAlways, CheckpointMode::kExceptLast, CheckpointMode::kNever}) {
    // 2 devices of 2 stages (the skip crosses devices both ways), and 3 devices of 2.
    configs.push_back({ScheduleKind::kInterleaved, checkpoint, {2, 2, 2, 2}, 4, 2});
    configs.push_back({ScheduleKind::kInterleaved, checkpoint, {1, 2, 1, 2, 1, 1}, 6, 2});
    // zb-h1 with W right after B, and with delays of their own per stage.
    configs.push_back({ScheduleKind::kZeroBubbleH1, checkpoint, {3, 3, 2}, 3, 1, {0, 0, 0}});
    configs.push_back({ScheduleKind::kZeroBubbleH1, checkpoint, {3, 3, 2}, 7, 1, {2, 0, 1}});
    configs.push_back(
        {ScheduleKind::kZeroBubbleH1, checkpoint, {3, 3, 2}, 3, 1, {kWholeBackward, 1, 0}});
  }
  return configs;
}

INSTANTIATE_TEST_SUITE_P(Matrix, Transparency, ::testing::ValuesIn(transparency_configs()));

TEST(Pipeline, Float32MatchesWithinTolerance) {
  torch::manual_seed(3);
  LayerSeq plain = make_model(5), piped = make_model(5);
  plain.to(torch::kFloat);
  piped.to(torch::kFloat);
  Batch input({torch::randn({10, kWidth}), torch::randn({10, kWidth})});
  const at::Tensor target = torch::randn({10, 3});
  const Reference ref = plain_step(plain, input, target);
  PipelineOptions options;
  options.chunks = 4;
  options.schedule = ScheduleKind::kOneFOneB;
  Pipeline pipeline(piped, {2, 3, 3}, {}, options);
  const StepResult result = pipeline.step(input, target, mse);
  EXPECT_NEAR(result.loss, ref.loss, 1e-5 * std::abs(ref.loss));
  const auto params = piped.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(torch::allclose(params[i].grad(), ref.grads[i], 1e-5, 1e-6)) << i;
  }
}

TEST(Pipeline, TimelineKeepsDependenciesWhenTheCoresAreBusy) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> spinners;
  for (unsigned c = 0; c < std::max(2u, std::thread::hardware_concurrency()); ++c) {
    spinners.emplace_back([&stop] {
      volatile double x = 0;
      while (!stop.load(std::memory_order_relaxed)) x = x + 1;
    });
  }
  torch::manual_seed(4);
  LayerSeq model = make_model(2);
  Batch input(
      {torch::randn({16, kWidth}, torch::kDouble), torch::randn({16, kWidth}, torch::kDouble)});
  const at::Tensor target = torch::randn({16, 3}, torch::kDouble);
  PipelineOptions options;
  options.chunks = 8;
  Pipeline pipeline(model, {1, 1, 1, 1, 1, 1, 1, 1}, {}, options);
  for (int step = 0; step < 20; ++step) {
    const StepResult result = pipeline.step(input, target, mse);
    expect_timeline_respects_dependencies(result.timeline, pipeline.stages(), options.chunks);
  }
  stop = true;
  for (auto& t : spinners) t.join();
}

}  // namespace
}  // namespace pipebal::pipeline
