// See run_devices.h.
#include "workflow/run_devices.h"

#include <stdexcept>

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/cuda.h>

namespace pipebal::workflow {
namespace {

std::string host_cuda(int64_t count) {
  if (count == 1) return "1 CUDA device (cuda:0)";
  return fmt::format("{} CUDA devices (cuda:0 to cuda:{})", count, count - 1);
}

}  // namespace

HostDevices this_host_devices() {
  HostDevices host;
  if (torch::cuda::is_available())
    host.cuda_count = static_cast<int64_t>(torch::cuda::device_count());
  return host;
}

std::vector<c10::Device> resolve_devices(const std::vector<std::string>& names,
                                         const HostDevices& host, std::optional<int> local_rank) {
  std::vector<c10::Device> devices;
  for (const std::string& name : names) {
    std::optional<c10::Device> parsed;
    try {
      parsed.emplace(name);
    } catch (const c10::Error&) {
      throw std::invalid_argument("unknown device '" + name + "' (e.g. cpu, cuda:0)");
    }
    c10::Device device = *parsed;
    if (device.is_cuda() && host.cuda_count == 0) {
      throw std::invalid_argument("device '" + name +
                                  "' requested, but no CUDA device is available");
    }
    const bool from_local_rank = device.is_cuda() && !device.has_index() && local_rank;
    if (from_local_rank)
      device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(*local_rank));
    if (device.is_cuda() && device.has_index() && device.index() >= host.cuda_count) {
      if (from_local_rank) {
        throw std::invalid_argument(fmt::format(
            "device '{}' means cuda:LOCAL_RANK, cuda:{} for local rank {}, but this host has {}: "
            "start at most {} processes on it, or name each rank's device",
            name, *local_rank, *local_rank, host_cuda(host.cuda_count), host.cuda_count));
      }
      throw std::invalid_argument(fmt::format("device '{}' requested, but this host has {}", name,
                                              host_cuda(host.cuda_count)));
    }
    devices.push_back(device);
  }
  return devices;
}

}  // namespace pipebal::workflow
