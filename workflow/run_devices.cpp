// See run_devices.h.
#include "pipebal/workflow/run_devices.h"

#include <stdexcept>

#include <fmt/format.h>

#include "pipebal/profiler/device.h"

namespace pipebal::workflow {

std::vector<c10::Device> resolve_devices(const std::vector<std::string>& names, int64_t cuda_count,
                                         std::optional<int> local_rank) {
  std::vector<c10::Device> devices;
  for (const std::string& name : names) {
    c10::Device device = profiler::device_named(name);
    if (device.is_cuda() && !device.has_index() && local_rank && cuda_count > 0) {
      if (*local_rank >= cuda_count) {
        throw std::invalid_argument(fmt::format(
            "device '{}' means cuda:LOCAL_RANK, cuda:{} for local rank {}, but this host has "
            "only {}: start at most {} processes on it, or name each rank's device",
            name, *local_rank, *local_rank, cuda_count, cuda_count));
      }
      device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(*local_rank));
    }
    profiler::require_on_host(device, name, cuda_count);
    devices.push_back(device);
  }
  return devices;
}

std::vector<std::vector<int>> stage_cpus(const std::vector<std::vector<int>>& device_cpus,
                                         size_t stages, size_t stages_per_device) {
  const size_t devices = device_cpus.size();
  if (stages != devices * stages_per_device) {
    throw std::invalid_argument(fmt::format(
        "CPUs given for {} devices, but the balance's {} stages, {} per device, do not make {}",
        devices, stages, stages_per_device, devices));
  }
  std::vector<std::vector<int>> cpus;
  for (size_t s = 0; s < stages; ++s) cpus.push_back(device_cpus[s % devices]);
  return cpus;
}

}  // namespace pipebal::workflow
