// Shared helpers for the balancer tests: random instances and brute-force references that
// enumerate every partition, written for clarity rather than speed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "pipebal/balance/cost_model.h"
#include "pipebal/balance/layer_cost.h"

namespace pipebal::balance::testing {

// Calls `visit` with every way of splitting `n` layers into `k` non-empty stages.
inline void for_each_partition(int n, int k,
                               const std::function<void(const std::vector<int>&)>& visit) {
  std::vector<int> balance;
  std::function<void(int, int)> recurse = [&](int left, int stages_left) {
    if (stages_left == 1) {
      balance.push_back(left);
      visit(balance);
      balance.pop_back();
      return;
    }
    for (int size = 1; size <= left - (stages_left - 1); ++size) {
      balance.push_back(size);
      recurse(left - size, stages_left - 1);
      balance.pop_back();
    }
  };
  recurse(n, k);
}

struct BruteForce {
  bool feasible = false;
  double bottleneck_ms = std::numeric_limits<double>::infinity();
  double sum_ms = std::numeric_limits<double>::infinity();  // smallest, at that bottleneck
  int64_t smallest_memory_bytes = std::numeric_limits<int64_t>::max();  // min over partitions
};

// The optimum by enumeration: bottleneck first, then the sum of stage costs; memory caps apply,
// to a stage's memory under `model`, or the lesser of it and its memory under `alternative`.
inline BruteForce brute_force(const CostModel& model, const CostModel* alternative = nullptr) {
  BruteForce best;
  for_each_partition(model.layer_count(), model.stage_count(), [&](const std::vector<int>& b) {
    double bottleneck = 0;
    double sum = 0;
    int64_t memory = 0;
    bool fits = true;
    int first = 0;
    for (int s = 0; s < static_cast<int>(b.size()); ++s) {
      const double cost = model.cost_ms(s, first, first + b[s]);
      int64_t bytes = model.memory_bytes(s, first, first + b[s]);
      if (alternative) bytes = std::min(bytes, alternative->memory_bytes(s, first, first + b[s]));
      bottleneck = std::max(bottleneck, cost);
      sum += cost;
      memory = std::max(memory, bytes);
      fits = fits && bytes <= model.memory_cap_bytes(s);
      first += b[s];
    }
    best.smallest_memory_bytes = std::min(best.smallest_memory_bytes, memory);
    if (!fits) return;
    best.feasible = true;
    if (bottleneck < best.bottleneck_ms) {
      best.bottleneck_ms = bottleneck;
      best.sum_ms = sum;
    } else if (bottleneck == best.bottleneck_ms) {
      best.sum_ms = std::min(best.sum_ms, sum);
    }
  });
  return best;
}

// Random layers; small integer costs make ties (and so the tie-break) common.
inline std::vector<LayerCost> random_layers(std::mt19937& rng, int n, bool integer_costs) {
  std::uniform_real_distribution<double> ms(0.0, 10.0);
  std::uniform_int_distribution<int> small(0, 4);
  std::uniform_int_distribution<int64_t> bytes(0, 1000);
  std::vector<LayerCost> layers(n);
  for (int i = 0; i < n; ++i) {
    LayerCost& l = layers[i];
    l.name = "layer" + std::to_string(i);
    l.forward_ms = integer_costs ? small(rng) : ms(rng);
    l.backward_ms = integer_costs ? 2 * small(rng) : ms(rng);
    l.weight_ms = l.backward_ms / 2;  // what zb-h1 defers into its W
    l.param_bytes = bytes(rng);
    l.activation_bytes = bytes(rng);
    l.output_bytes = bytes(rng) / 4;
    // What B keeps for W, and all a micro-batch holds from B to W (-1: not measured).
    l.kept_grad_bytes = bytes(rng) / 2;
    l.weight_held_bytes = rng() % 4 == 0 ? -1 : bytes(rng);
    // The most forward and backward allocate (0: not measured).
    l.peak_bytes = rng() % 4 == 0 ? 0 : l.activation_bytes + bytes(rng);
    // The most a W adds (0: not measured).
    l.weight_peak_bytes = rng() % 4 == 0 ? 0 : bytes(rng) / 2;
    // Skips carried through, and the input's gradients (-1: not measured).
    l.carried_bytes = rng() % 3 == 0 ? bytes(rng) / 4 : 0;
    l.input_grad_bytes = rng() % 4 == 0 ? -1 : bytes(rng) / 4;
  }
  return layers;
}

// A random partition of `n` layers into `k` non-empty stages as its k + 1 boundaries: 0, the
// cut points drawn without replacement, n.
inline std::vector<int> random_cuts(std::mt19937& rng, int n, int k) {
  std::vector<int> cuts;
  for (int c = 1; c < n; ++c) cuts.push_back(c);
  std::shuffle(cuts.begin(), cuts.end(), rng);
  cuts.resize(k - 1);
  cuts.push_back(0);
  cuts.push_back(n);
  std::sort(cuts.begin(), cuts.end());
  return cuts;
}

// Random schedule (zb-h1 with H1's W delays or random ones), checkpointing and micro-batch
// count; speeds and bandwidth when asked.
inline CostOptions random_options(std::mt19937& rng, int k, bool speeds, bool bandwidth) {
  CostOptions options;
  const pipeline::ScheduleKind kinds[] = {pipeline::ScheduleKind::kGPipe,
                                          pipeline::ScheduleKind::kOneFOneB,
                                          pipeline::ScheduleKind::kZeroBubbleH1};
  options.schedule = kinds[rng() % 3];
  const pipeline::CheckpointMode modes[] = {pipeline::CheckpointMode::kAlways,
                                            pipeline::CheckpointMode::kExceptLast,
                                            pipeline::CheckpointMode::kNever};
  options.checkpoint = modes[rng() % 3];
  options.chunks = 1 + static_cast<int>(rng() % 5);
  if (options.schedule == pipeline::ScheduleKind::kZeroBubbleH1 && rng() % 2 == 0) {
    for (int s = 0; s < k; ++s) {
      options.weight_delays.push_back(static_cast<int>(rng() % (options.chunks + 1)));
    }
  }
  if (speeds) {
    const double choices[] = {0.5, 1.0, 1.5, 2.0, 3.0};
    for (int s = 0; s < k; ++s) options.device_speeds.push_back(choices[rng() % 5]);
  }
  if (bandwidth) {
    options.bandwidth_bytes_per_ms = 10.0 + static_cast<double>(rng() % 100);
    // Data-parallel replicas whose all-reduce weighs on some stages more than on others.
    options.replicas = 1 + static_cast<int>(rng() % 4);
    options.allreduce_bytes_per_ms = 5.0 + static_cast<double>(rng() % 50);
  }
  return options;
}

}  // namespace pipebal::balance::testing
