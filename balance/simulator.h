// Predicts one training step by walking a pipeline::Schedule's action lists, the same lists the
// engine executes. Each device runs its actions in its order, one at a time (with one stage per
// device: the stage's list; interleaved: its stages' lists interleaved); F(s, i) waits for
// F(s-1, i) plus the transfer across boundary s-1, B(s, i) for B(s+1, i) plus the transfer back
// across boundary s (the last stage's B needs only its own F), R(s, i) and W(s, i) have no
// cross-stage dependency. Transfers are pure delays: links have no contention and do not occupy
// a stage.
#pragma once

#include <cstdint>
#include <vector>

#include "pipebal/pipeline/schedule.h"
#include "pipebal/pipeline/timeline.h"

namespace pipebal::balance {

// How long one micro-batch's actions take on a stage.
struct StageDurations {
  double forward_ms = 0;
  double recompute_ms = 0;
  double backward_ms = 0;  // a schedule that splits backwards: B, the input gradient's part
  double weight_ms = 0;    // W, the parameters' gradients (splitting schedules only)
};

// A stage's memory: `fixed_bytes` (parameters, gradients, optimizer state) always; after its F
// a micro-batch holds `input_bytes` (the stage input it took, which its backward needs), after
// an uncheckpointed F or an R `activation_bytes` more; its B frees all of it. When the schedule
// splits backwards, from its B to its W it holds `weight_bytes` instead of the activations
// (what W needs of them and the output gradients B kept for it) besides the input, which W
// frees with them. While a B runs it allocates up to `backward_bytes` more (the gradients
// flowing back through the layers, the parameters' new gradients before they are added to the
// held ones, workspaces), less what it frees on the way. While a W runs, its micro-batch holds
// `weight_run_bytes` instead of `weight_bytes` (besides its input): what W needs and, above it,
// the largest of its layers' W transients; on the first stage, whose W is its whole backward,
// the backward's transients and every parameter's new gradient, added to the held ones at its
// end.
struct StageMemory {
  int64_t fixed_bytes = 0;
  int64_t input_bytes = 0;
  int64_t activation_bytes = 0;
  int64_t weight_bytes = 0;
  int64_t backward_bytes = 0;
  int64_t weight_run_bytes = 0;
  // The messages it sends: each F's output to the next stage, each B's input gradient to the
  // previous one. The engine posts a message at the end of the action that made it and the
  // receiver takes it when its action that needs it starts; until then it is the sender's
  // memory (as on a device, whose send buffer lives until the receiver has it). Only the timed
  // peak counts them, as how many wait at once depends on the timeline, and only where the
  // stage would not hold them anyway: an uncheckpointed F's output is among its activations
  // until the B, which back-propagates from it.
  int64_t output_bytes = 0;
  int64_t input_grad_bytes = 0;
};

// The engine's timeline entry: a predicted timeline compares with a measured one field by field.
using TimedAction = pipeline::TimedAction;

struct SimulationResult {
  double step_ms = 0;  // the last action's end; the step starts at 0
  // The share of devices × step_ms left idle: 1 - sum over devices of (busy + finishing work)
  // / (devices * step_ms).
  double bubble_fraction = 0;
  std::vector<double> busy_ms;  // per stage
  // Per stage, counted at the end of every action and during each B and W: what its own
  // actions hold (the cost model's timing-free bound), and that plus the messages it sent
  // that are waiting, at that moment of the timeline, for their receiver to take them.
  std::vector<int64_t> peak_bytes;
  std::vector<int64_t> timed_peak_bytes;
  std::vector<std::vector<TimedAction>> timeline;  // [stage], in execution order
};

// Runs `schedule` with per-stage `durations`, `transfer_ms[b]` for boundary b (between stage b
// and b+1; stages-1 entries) and per-stage `memory` (empty: peaks are 0). `finish_ms[s]` (empty:
// none) is work after stage s's last action that ends its step but is no computation (the
// gradient all-reduce over data-parallel replicas, the engine's cost per step): a device does
// its stages' finishing work one after another once its last action has ended. It counts in
// step_ms, not in busy_ms, nor in the bubble.
// Throws std::invalid_argument on mismatched sizes and std::logic_error if the schedule
// deadlocks.
SimulationResult simulate(const pipeline::Schedule& schedule,
                          const std::vector<StageDurations>& durations,
                          const std::vector<double>& transfer_ms,
                          const std::vector<StageMemory>& memory,
                          const std::vector<double>& finish_ms = {});

}  // namespace pipebal::balance
