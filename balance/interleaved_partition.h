// The partitioner for the interleaved schedule. A per-stage bottleneck (dp_partition's
// objective) does not decide the step there: each device runs several stages, so what counts is
// how the work falls on the devices and how the interleaved order overlaps it. This search
// minimises the simulated step itself, exactly: depth-first over the cut positions, pruning a
// prefix of stages once the busiest device's work already reaches the best step found (a device
// runs its actions one at a time, so its busy time bounds the step from below). With memory
// caps, a device's stages share its cap: prefixes over it are pruned as well.
#pragma once

#include <cstdint>
#include <vector>

#include "pipebal/balance/cost_model.h"

namespace pipebal::balance {

// The prefixes `balance` lets the search visit.
constexpr int64_t kSearchNodes = 2'000'000;

struct InterleavedSearch {
  std::vector<int> balance;  // layers per stage
  double step_ms = 0;        // its simulated step
  int64_t nodes = 0;         // prefixes visited
  bool exhaustive = true;    // false: stopped at the node limit, `balance` is the best found
};

// The balance with the smallest simulated step (simulate_balance) for `model`'s interleaved
// schedule whose devices fit their memory caps, starting from `start` (e.g. dp_partition's) as
// the best known when it fits. Visits at most `node_limit` prefixes. Throws
// std::invalid_argument when the model's schedule is not interleaved, `start` is not a balance
// of its layers, or no balance found fits the caps.
InterleavedSearch interleaved_partition(const CostModel& model, const std::vector<int>& start,
                                        int64_t node_limit = kSearchNodes);

// interleaved_partition from dp_partition's per-stage balance: `balance --algorithm dp` under the
// interleaved schedule. When no balance fits the caps, throws std::invalid_argument saying the
// smallest cap, the same on every device, with which one is found (or a cap that fits, when the
// searches that would prove it smallest stop at their bound).
InterleavedSearch interleaved_dp_partition(const CostModel& model);

}  // namespace pipebal::balance
