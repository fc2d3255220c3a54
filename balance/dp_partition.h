// The exact partitioner: the balance that minimises the bottleneck (the largest stage cost,
// compute time plus outgoing transfer) under every stage's memory cap and speed factor.
#pragma once

#include <cstdint>
#include <vector>

#include "pipebal/balance/cost_model.h"

namespace pipebal::balance {

// Layers per stage, summing to the layer count, no stage empty. Primary objective: the smallest
// bottleneck max_s cost_ms(s, ...), exact in the model's double arithmetic. Secondary (among
// partitions at that bottleneck): the smallest sum of stage costs, which is what a pipeline's
// fill and drain take, so it orders step times. O(k n) per bisection step plus O(k n log n).
// Throws std::invalid_argument when no partition fits the memory caps, giving the smallest cap
// that would work. With an `alternative` model (the same layers and stages; zb-h1 with every
// backward whole beside `model`'s W right after B), a stage fits where either model's memory
// does: its W delays are chosen afterwards (weight_delays.h), down to a whole backward.
std::vector<int> dp_partition(const CostModel& model, const CostModel* alternative = nullptr);

// The smallest memory cap that, applied to every stage, lets some partition fit (under either
// model's memory, with an `alternative`); ignores time. kUnlimitedBytes when none does: every
// partition has a stage whose memory saturates there (cost_model.h).
int64_t smallest_feasible_memory_cap(const CostModel& model,
                                     const CostModel* alternative = nullptr);

}  // namespace pipebal::balance
