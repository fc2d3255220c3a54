// An interleaved pipeline's stages on their devices: each device's stages run on its one thread,
// as the simulator assumes, and so must be on one device.
#include <mutex>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "pipebal/pipeline/pipeline.h"
#include "tests/support/skip_model.h"

namespace pipebal::pipeline {
namespace {

using testing::kWidth;
using testing::make_model;
using testing::mse;

// A device's interleaved stages share its thread: given different devices, they are refused before
// any layer moves (no CUDA is touched here).
TEST(Pipeline, InterleavedStagesOfADeviceMustShareItsDevice) {
  PipelineOptions options;
  options.chunks = 4;
  options.schedule = ScheduleKind::kInterleaved;
  options.virtual_stages = 2;
  const c10::Device cpu(c10::kCPU);
  try {
    Pipeline pipeline(make_model(2), {2, 2, 2, 2}, {cpu, cpu, c10::Device("cuda:0"), cpu}, options);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& error) {
    EXPECT_STREQ(error.what(),
                 "stages 0 and 2 run on one device's thread (2 stages per device) but were given "
                 "devices cpu and cuda:0: give every stage of a device the same one");
  }
  const Pipeline pipeline(make_model(2), {2, 2, 2, 2}, {cpu, cpu, cpu, cpu}, options);
  EXPECT_TRUE(pipeline.runs_stage(3));
  EXPECT_THROW((void)pipeline.runs_stage(4), std::out_of_range);
}

// Interleaved, a device's stages share one thread, as the simulator assumes: it runs their
// actions in the device's order, telling on_stage_enter each time it turns to another stage.
TEST(Pipeline, InterleavedStagesOfADeviceShareItsThread) {
  LayerSeq seq = make_model(2);
  std::mutex mutex;
  std::vector<std::set<std::thread::id>> threads(4);
  std::vector<int> entered;  // stages entered, in order, across both devices' threads
  PipelineOptions options;
  options.chunks = 4;
  options.schedule = ScheduleKind::kInterleaved;
  options.virtual_stages = 2;
  options.on_stage_enter = [&](int stage) {
    std::lock_guard<std::mutex> lock(mutex);
    threads[static_cast<size_t>(stage)].insert(std::this_thread::get_id());
    entered.push_back(stage);
  };
  Pipeline pipeline(seq, {2, 2, 2, 2}, {}, options);
  const std::vector<int> at_start = entered;
  EXPECT_EQ(std::multiset<int>(at_start.begin(), at_start.end()), std::multiset<int>({0, 1, 2, 3}));
  pipeline.step(
      Batch({torch::randn({8, kWidth}, torch::kDouble), torch::randn({8, kWidth}, torch::kDouble)}),
      torch::randn({8, 3}, torch::kDouble), mse);
  for (int s = 0; s < 4; ++s) ASSERT_EQ(threads[static_cast<size_t>(s)].size(), 1u) << s;
  EXPECT_EQ(threads[0], threads[2]);
  EXPECT_EQ(threads[1], threads[3]);
  EXPECT_NE(threads[0], threads[1]);
  // In the step, each device's thread entered a stage at each change of the stage it works for:
  // each of its stages in turn to set their channels up, the stages of its actions in the
  // device's order, then each in turn again to finish.
  size_t switches = 0;
  for (const auto& order : pipeline.schedule().device_order) {
    std::vector<int> worked_for = {order.front().stage % 2, order.front().stage % 2 + 2};
    for (const DeviceStep& step : order) worked_for.push_back(step.stage);
    worked_for.insert(worked_for.end(), worked_for.begin(), worked_for.begin() + 2);
    for (size_t k = 0; k < worked_for.size(); ++k) {
      switches += k == 0 || worked_for[k] != worked_for[k - 1];
    }
  }
  EXPECT_EQ(entered.size() - at_start.size(), switches);
  EXPECT_GT(switches, 8u);  // the device's order alternates between its stages
}

}  // namespace
}  // namespace pipebal::pipeline
