// See device_options.h.
#include "tools/device_options.h"

#include <stdexcept>

#include <fmt/format.h>

#include "pipebal/balance/profile_options.h"
#include "pipebal/balance/units.h"

namespace pipebal::tools {

void add_device_options(CLI::App& cmd, DeviceParams& params) {
  auto* cap = cmd.add_option("--memory-cap", params.memory_cap,
                             "Memory of every device, e.g. 8G (default: unlimited)");
  auto* caps = cmd.add_option("--memory-caps", params.memory_caps,
                              "Memory per device in stage order, e.g. 8G,8G,4G")
                   ->delimiter(',');
  cap->excludes(caps);
  cmd.add_option("--device-speeds", params.device_speeds,
                 "Speed factor per device in stage order, e.g. 1,1,0.5 (default: all 1)")
      ->delimiter(',');
  cmd.add_option(
      "--bandwidth", params.bandwidth,
      "Link bandwidth between stages, e.g. 10GB/s or 25Gbit/s (default: the link measured in the "
      "profile by `pipebal link`, else free transfers)");
  cmd.add_option("--allreduce-bandwidth", params.allreduce_bandwidth,
                 "Bandwidth of the replicas' gradient all-reduce (default: --bandwidth's)");
  cmd.add_option("--param-scale", params.param_scale,
                 "Bytes kept per parameter byte (2: gradients; Adam ~4)")
      ->capture_default_str();
}

void apply_device_params(const DeviceParams& params, const balance::CostProfile& profile,
                         int devices, balance::CostOptions& options) {
  if (!params.memory_cap.empty() && !params.memory_caps.empty()) {
    throw std::invalid_argument("give either --memory-cap or --memory-caps, not both");
  }
  const auto check_per_device = [devices](size_t values, const char* option) {
    if (values > 1 && values != static_cast<size_t>(devices)) {
      throw std::invalid_argument(
          fmt::format("{}: {} values for {} devices (give one for every device or one per device)",
                      option, values, devices));
    }
  };
  check_per_device(params.memory_caps.size(), "--memory-caps");
  check_per_device(params.device_speeds.size(), "--device-speeds");
  options.param_scale = params.param_scale;
  options.memory_caps_bytes.clear();
  if (!params.memory_cap.empty()) {
    options.memory_caps_bytes = {balance::parse_bytes(params.memory_cap)};
  }
  for (const std::string& cap : params.memory_caps) {
    options.memory_caps_bytes.push_back(balance::parse_bytes(cap));
  }
  options.device_speeds = params.device_speeds;
  // The engine's costs and the link measured by `pipebal link`, unless --bandwidth overrides it.
  balance::apply_profile_measurements(profile, options);
  if (!params.bandwidth.empty()) {
    options.bandwidth_bytes_per_ms = balance::parse_bandwidth_bytes_per_ms(params.bandwidth);
    options.latency_ms = 0;
  }
  options.allreduce_bytes_per_ms =
      params.allreduce_bandwidth.empty()
          ? options.bandwidth_bytes_per_ms
          : balance::parse_bandwidth_bytes_per_ms(params.allreduce_bandwidth);
}

std::string measured_link_note(const DeviceParams& params, const balance::CostProfile& profile) {
  if (!params.bandwidth.empty() || !profile.link) return "";
  const double handoff_ms = profile.engine ? profile.engine->handoff_ms : 0;
  return fmt::format(
      "transfers over the link measured in the profile: {:.3f} ms latency + bytes at {}{}\n",
      profile.link->latency_ms, balance::format_bandwidth(profile.link->bandwidth_bytes_per_ms),
      handoff_ms > profile.link->latency_ms
          ? fmt::format(" (each message at least the engine's hand-off, {:.3f} ms)", handoff_ms)
          : "");
}

}  // namespace pipebal::tools
