// Profiles of one model taken at different times, pooled into one. On a shared machine the
// cores slow down and recover over seconds: the passes of one profile, run back to back, all see
// the same moment, so a profile taken while the machine is slow is slow throughout. Several
// short rounds spread over time, pooled, take the median over moments instead, which is what a
// training run of many steps measures.
//
//   std::vector<profiler::Profile> rounds;
//   for (int r = 0; r < 3; ++r) rounds.push_back(profiler::profile_model(layers, sample, options));
//   const profiler::Profile pooled = profiler::merge_profiles(rounds);
#pragma once

#include <vector>

#include "pipebal/profiler/profiler.h"

namespace pipebal::profiler {

// Recomputes the layers' times from their timing samples, sample i of every layer taken in timed
// pass i (forward, backward, and the split B/W passes). A layer's own median leaves out the
// machine's interruptions (a timer tick, another process), which strike a few layers of each
// pass, yet a stage runs its layers in one go, interruptions included: on models of many layers
// the sum of the medians fell short of the median pass (reports/layer-sum.md). So each kind of pass
// scales its layers' medians (and p10/p90) by one factor, the median over passes of their total
// over the sum of the medians: the layers then add up to the median pass, each keeping its share.
// Layers without one sample per pass each keep their own medians.
void summarise_passes(std::vector<LayerProfile>& layers);

// One profile holding every round's timing samples (forward, backward and W), per layer and per
// micro-batch size, with medians and percentiles recomputed over them; everything else (memory,
// shapes, environment) is the first round's but the machine's load, over all rounds. The rounds
// must profile the same layers (count, names and types) at the same micro-batch sizes;
// std::invalid_argument names the first difference, and an empty list.
Profile merge_profiles(const std::vector<Profile>& rounds);

}  // namespace pipebal::profiler
