// What pipebal's engine adds to a training step beyond the per-layer costs the profiler measures:
// the cost model's balance::EngineCost. A fraction of a millisecond per step, it matters on models
// of many small layers, whose steps take a few milliseconds, and grows with the micro-batch count.
//
// Measured on a trivial model, one 8-wide linear layer: its step is timed through the engine (one
// stage, checkpoint never) at 1 micro-batch of one sample and at 8 of one sample each, in
// alternating rounds, and the layer is profiled as any model's, loss included. With c the
// profiled forward + backward of one sample:
//   step(1) = step_ms + 2 action_ms + c      step(8) = step_ms + 8 (2 action_ms + c)
// The hand-off comes from two such layers at one micro-batch, as one stage and as two: the two
// stages take two actions and two messages more (the forward's output, the input's gradient),
//   step(2 stages) - step(1 stage) = 2 action_ms + 2 handoff_ms
// which also charges each message its share of waking a second stage's thread for the step.
// All are clamped at 0 (the profile of so small a layer may exceed its share of a step).
#pragma once

#include <optional>
#include <vector>

#include "pipebal/balance/layer_cost.h"

namespace pipebal::profiler {

// On the CPU, with the calling thread's intra-op thread count for the stage; `rounds` profiled
// passes of the layer and ten times as many rounds of the four steps (medians of each). The
// layer's profile takes `autograd_run_ms` off its backward (autograd_run_cost.h) as the model's
// did, so that the engine's costs charge back what was taken off; unset, it measures it. With
// `device_cpus` (ProfileOptions::device_cpus) the one-stage pipelines run on the first device's
// CPUs and the two-stage one on the first two's, as a pinned run's stages do.
balance::EngineCost measure_engine_cost(int rounds = 20,
                                        std::optional<double> autograd_run_ms = std::nullopt,
                                        const std::vector<std::vector<int>>& device_cpus = {});

}  // namespace pipebal::profiler
