// The devices a plan is made for, as `pipebal balance` and `pipebal plan` take them: memory
// caps, speed factors, link and all-reduce bandwidth, bytes kept per parameter byte.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "pipebal/balance/cost_model.h"
#include "pipebal/balance/layer_cost.h"

namespace pipebal::tools {

struct DeviceParams {
  std::string memory_cap;                // one cap for every device, e.g. "8G"
  std::vector<std::string> memory_caps;  // one per device, in stage order
  std::vector<double> device_speeds;     // one per device, or one for all
  std::string bandwidth;                 // e.g. "10GB/s"; empty: the profile's link, else free
  std::string allreduce_bandwidth;       // empty: `bandwidth`'s
  double param_scale = 2.0;
};

// Registers --memory-cap, --memory-caps, --device-speeds, --bandwidth, --allreduce-bandwidth and
// --param-scale on `cmd`.
void add_device_options(CLI::App& cmd, DeviceParams& params);

// Sets `options`' caps, speeds, bandwidths and parameter scale from `params`, for `devices`
// devices (interleaved, each holds several stages, which share its cap and speed); without
// --bandwidth, the link measured in `profile` (`pipebal link`) when there is one. Throws
// std::invalid_argument for an unreadable size or bandwidth, both cap options, or caps or speeds
// that are neither one value nor one per device.
void apply_device_params(const DeviceParams& params, const balance::CostProfile& profile,
                         int devices, balance::CostOptions& options);

// One line saying the profile's measured link is in use, or "" when --bandwidth overrides it or
// the profile has none.
std::string measured_link_note(const DeviceParams& params, const balance::CostProfile& profile);

}  // namespace pipebal::tools
