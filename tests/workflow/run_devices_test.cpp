// --devices against the host: "cuda" is this process's GPU when it is one of several, and a
// device the host lacks is refused with one line before anything starts. The host's CUDA device
// count is given, so that a CPU machine checks what a GPU host would be told.
#include "pipebal/workflow/run_devices.h"

#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "pipebal/profiler/device.h"

namespace pipebal::workflow {
namespace {

std::string refusal(const std::vector<std::string>& names, int64_t cuda_count,
                    std::optional<int> local_rank = std::nullopt) {
  try {
    resolve_devices(names, cuda_count, local_rank);
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "";
}

TEST(RunDevices, NamesAreParsedAndCudaIsThisProcesssGpuAcrossProcesses) {
  const auto devices = resolve_devices({"cpu", "cuda:1", "cuda"}, 2);
  ASSERT_EQ(devices.size(), 3u);
  EXPECT_TRUE(devices[0].is_cpu());
  EXPECT_EQ(devices[1], c10::Device(c10::kCUDA, 1));
  EXPECT_FALSE(devices[2].has_index()) << "one process: the current CUDA device, as LibTorch's";

  const auto of_rank_1 = resolve_devices({"cuda"}, 2, 1);
  EXPECT_EQ(of_rank_1.at(0), c10::Device(c10::kCUDA, 1));
  const auto named = resolve_devices({"cuda:0"}, 2, 1);
  EXPECT_EQ(named.at(0), c10::Device(c10::kCUDA, 0)) << "a named index is kept";
  EXPECT_TRUE(resolve_devices({"cpu"}, 0, 3).at(0).is_cpu());
}

TEST(RunDevices, ADeviceTheHostLacksIsOneLine) {
  EXPECT_EQ(refusal({"cuda:2"}, 2),
            "device 'cuda:2': this host has 2 CUDA devices (cuda:0 to cuda:1)");
  EXPECT_EQ(refusal({"cpu", "cuda:1"}, 1), "device 'cuda:1': this host has 1 CUDA device (cuda:0)");
  EXPECT_EQ(refusal({"cuda"}, 2, 2),
            "device 'cuda' means cuda:LOCAL_RANK, cuda:2 for local rank 2, but this host has "
            "only 2: start at most 2 processes on it, or name each rank's device");
  EXPECT_EQ(refusal({"cuda:0"}, 0), "device 'cuda:0': no CUDA device is available");
  EXPECT_EQ(refusal({"cuda"}, 0, 1), "device 'cuda': no CUDA device is available");
  EXPECT_EQ(refusal({"gpu0"}, 2), "device 'gpu0': expected cpu, cuda or cuda:N");
  EXPECT_EQ(refusal({"mps"}, 2), "device 'mps': pipebal runs on cpu or cuda");
  EXPECT_EQ(refusal({"cuda:1"}, 2), "");
}

TEST(RunDevices, ThisHostIsWhatLibTorchSees) {
  const int64_t count = profiler::host_cuda_count();
  EXPECT_GE(count, 0);
  if (count == 0) {
    EXPECT_NE(refusal({"cuda"}, count), "");
  } else {
    EXPECT_EQ(refusal({"cuda:" + std::to_string(count - 1)}, count), "");
  }
}

// Each stage takes its device's CPUs: interleaved, stages d and d + devices share device d's.
TEST(StageCpus, EachStageOnItsDevicesCpus) {
  EXPECT_EQ(stage_cpus({{3}, {1, 2}}, 2, 1), (std::vector<std::vector<int>>{{3}, {1, 2}}));
  EXPECT_EQ(stage_cpus({{3}, {1, 2}}, 4, 2),
            (std::vector<std::vector<int>>{{3}, {1, 2}, {3}, {1, 2}}));
  try {
    stage_cpus({{3}, {1}}, 3, 1);
    FAIL() << "3 stages were given 2 devices' CPUs";
  } catch (const std::invalid_argument& error) {
    EXPECT_STREQ(error.what(),
                 "CPUs given for 2 devices, but the balance's 3 stages, 1 per device, do not "
                 "make 2");
  }
  EXPECT_THROW(stage_cpus({{3}, {1}}, 5, 2), std::invalid_argument);
}

}  // namespace
}  // namespace pipebal::workflow
