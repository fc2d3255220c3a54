// --devices against the host: "cuda" is this process's GPU when it is one of several, and a
// device the host lacks is refused with one line before anything starts. The host is given, so
// that a CPU machine checks what a GPU host would be told.
#include "workflow/run_devices.h"

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

namespace pipebal::workflow {
namespace {

std::string refusal(const std::vector<std::string>& names, HostDevices host,
                    std::optional<int> local_rank = std::nullopt) {
  try {
    resolve_devices(names, host, local_rank);
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "";
}

TEST(RunDevices, NamesAreParsedAndCudaIsThisProcesssGpuAcrossProcesses) {
  const HostDevices two_gpus{2};
  const auto devices = resolve_devices({"cpu", "cuda:1", "cuda"}, two_gpus);
  ASSERT_EQ(devices.size(), 3u);
  EXPECT_TRUE(devices[0].is_cpu());
  EXPECT_EQ(devices[1], c10::Device(c10::kCUDA, 1));
  EXPECT_FALSE(devices[2].has_index()) << "one process: the current CUDA device, as LibTorch's";

  const auto of_rank_1 = resolve_devices({"cuda"}, two_gpus, 1);
  EXPECT_EQ(of_rank_1.at(0), c10::Device(c10::kCUDA, 1));
  const auto named = resolve_devices({"cuda:0"}, two_gpus, 1);
  EXPECT_EQ(named.at(0), c10::Device(c10::kCUDA, 0)) << "a named index is kept";
  EXPECT_TRUE(resolve_devices({"cpu"}, HostDevices{0}, 3).at(0).is_cpu());
}

TEST(RunDevices, ADeviceTheHostLacksIsOneLine) {
  EXPECT_EQ(refusal({"cuda:2"}, HostDevices{2}),
            "device 'cuda:2' requested, but this host has 2 CUDA devices (cuda:0 to cuda:1)");
  EXPECT_EQ(refusal({"cpu", "cuda:1"}, HostDevices{1}),
            "device 'cuda:1' requested, but this host has 1 CUDA device (cuda:0)");
  EXPECT_EQ(refusal({"cuda"}, HostDevices{2}, 2),
            "device 'cuda' means cuda:LOCAL_RANK, cuda:2 for local rank 2, but this host has 2 "
            "CUDA devices (cuda:0 to cuda:1): start at most 2 processes on it, or name each "
            "rank's device");
  EXPECT_EQ(refusal({"cuda:0"}, HostDevices{0}),
            "device 'cuda:0' requested, but no CUDA device is available");
  EXPECT_EQ(refusal({"tpu:0"}, HostDevices{2}), "unknown device 'tpu:0' (e.g. cpu, cuda:0)");
  EXPECT_EQ(refusal({"cuda:1"}, HostDevices{2}), "");
}

TEST(RunDevices, ThisHostIsWhatLibTorchSees) {
  const HostDevices host = this_host_devices();
  EXPECT_GE(host.cuda_count, 0);
  if (host.cuda_count == 0) {
    EXPECT_NE(refusal({"cuda"}, host), "");
  } else {
    EXPECT_EQ(refusal({"cuda:" + std::to_string(host.cuda_count - 1)}, host), "");
  }
}

}  // namespace
}  // namespace pipebal::workflow
