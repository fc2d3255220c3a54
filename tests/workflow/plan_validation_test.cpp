// Which trained configuration times the devices' cores in turns with the runs: one stage on each
// device, at the devices' own thread count, neither interleaved nor replicated.
#include "pipebal/workflow/plan_validation.h"

#include <gtest/gtest.h>

#include <vector>

namespace {

using pipebal::balance::Configuration;
using pipebal::workflow::CheckedConfiguration;
using pipebal::workflow::one_stage_per_device_index;

CheckedConfiguration configuration(int stages, int virtual_stages, int replicas, int threads) {
  CheckedConfiguration checked;
  checked.config.stages = stages;
  checked.config.virtual_stages = virtual_stages;
  checked.config.replicas = replicas;
  checked.config.threads_per_stage = threads;
  return checked;
}

TEST(PlanValidation, CoresAreTimedOnAPipelineOfOneStagePerDevice) {
  const std::vector<CheckedConfiguration> list = {
      configuration(1, 1, 1, 0),  // the plain model
      configuration(1, 1, 1, 2),  // the plain model on both devices' threads
      configuration(2, 2, 1, 0),  // interleaved: two stages on each device
      configuration(2, 1, 2, 0),  // replicated
      configuration(3, 1, 1, 0),  // more stages than devices
      configuration(2, 1, 1, 0),  // one stage on each of 2 devices
      configuration(2, 1, 1, 0),
  };
  EXPECT_EQ(one_stage_per_device_index(list, 2), 5);
  EXPECT_EQ(one_stage_per_device_index(list, 3), 4);
  EXPECT_EQ(one_stage_per_device_index(list, 4), -1);
  EXPECT_EQ(one_stage_per_device_index({list.begin(), list.begin() + 5}, 2), -1);
}

}  // namespace
