// See profile_options.h.
#include "pipebal/balance/profile_options.h"

namespace pipebal::balance {

void apply_profile_measurements(const CostProfile& profile, CostOptions& options) {
  if (profile.engine) options.engine = *profile.engine;
  if (profile.link) {
    options.bandwidth_bytes_per_ms = profile.link->bandwidth_bytes_per_ms;
    options.latency_ms = profile.link->latency_ms;
    options.allreduce_bytes_per_ms = profile.link->bandwidth_bytes_per_ms;
  }
}

CostOptions profile_cost_options(const CostProfile& profile, int requested_chunks) {
  CostOptions options;
  options.chunks = planned_chunks(profile, requested_chunks);
  apply_profile_measurements(profile, options);
  return options;
}

}  // namespace pipebal::balance
