// Shared helpers for the planner tests: profiles whose costs follow a known function of the
// micro-batch size, and searches over a given number of devices.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipebal/balance/planner.h"

namespace pipebal::balance::testing {

inline PlanSearch on_devices(int devices) {
  PlanSearch search;
  search.devices = devices;
  return search;
}

// `per_sample_ms.size()` layers measured at micro-batch sizes 1, 2, 4, ..., batch: layer i costs
// fixed_ms + per_sample_ms[i] * b forward (twice that backward) at size b.
inline CostProfile profile_of(const std::vector<double>& per_sample_ms, double fixed_ms,
                              int64_t batch) {
  CostProfile profile;
  profile.model = "test";
  profile.input_shape = {batch, 4};
  profile.chunks = 1;
  profile.batch_size = batch;
  for (int64_t b = 1; b <= batch; b *= 2) {
    SizedCosts sized;
    sized.micro_batch_size = b;
    for (size_t i = 0; i < per_sample_ms.size(); ++i) {
      LayerCost layer;
      layer.name = "l" + std::to_string(i);
      layer.forward_ms = fixed_ms + per_sample_ms[i] * double(b);
      layer.backward_ms = 2 * layer.forward_ms;
      layer.param_bytes = 1000;
      layer.activation_bytes = 1000 * b;
      layer.output_bytes = 100 * b;
      sized.layers.push_back(layer);
    }
    if (b == batch) profile.layers = sized.layers;
    profile.sizes.push_back(sized);
  }
  return profile;
}

// Two devices, and the plain model of profile_of({1, 1, 1, 1}, 0, 8) profiled on two threads
// `speedup` times as fast.
inline PlanSearch on_two_devices_with_two_threads(double speedup) {
  const double per_sample = 1 / speedup;
  CostProfile wide = profile_of({per_sample, per_sample, per_sample, per_sample}, 0, 8);
  wide.threads = 2;
  PlanSearch search = on_devices(2);
  search.plain_profiles = {wide};
  return search;
}

}  // namespace pipebal::balance::testing
