// The cost model: what a stage holding layers [first, end) costs on the device of stage `stage`,
// in time per micro-batch, transfer time and peak memory, for one schedule and checkpoint mode.
// Every partitioner and the simulator's inputs come from here, so they agree by construction.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "pipebal/balance/layer_cost.h"
#include "pipebal/balance/range_max.h"
#include "pipebal/balance/simulator.h"
#include "pipebal/pipeline/schedule.h"

namespace pipebal::balance {

constexpr int64_t kUnlimitedBytes = std::numeric_limits<int64_t>::max();
// The partitioners keep a choice for each stage and layer end: at most this many (1 GiB of them),
// so that a model of many layers cut into as many stages is refused, not run out of memory.
constexpr int64_t kMaxStageLayerPairs = int64_t{1} << 28;

// How stages are costed. Plain struct with defaults, e.g.
//   CostOptions options;
//   options.chunks = 8;
//   options.memory_caps_bytes = {8LL << 30};  // 8 GiB on every device
struct CostOptions {
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::kGPipe;
  // Stages per device with the interleaved schedule: `stages` model stages on stages /
  // virtual_stages devices, stage s on device s % devices.
  int virtual_stages = 1;
  // zb-h1: each stage's W delay (pipeline::Schedule::weight_delays); empty: H1's here, while
  // partition() and the planner choose them for their balance under a memory budget
  // (weight_delays.h).
  std::vector<int> weight_delays;
  pipeline::CheckpointMode checkpoint = pipeline::CheckpointMode::kExceptLast;  // as torchgpipe
  int chunks = pipeline::kDefaultChunks;   // micro-batches per step
  double param_scale = 2.0;                // bytes kept per parameter byte: 2 = grads, Adam ~4
  std::vector<int64_t> memory_caps_bytes;  // empty: unlimited; one value: every stage;
                                           // interleaved: also one per device
  std::vector<double> device_speeds;       // empty: all 1; one value: every stage; interleaved:
                                           // also one per device
  double bandwidth_bytes_per_ms = 0;       // link bandwidth; 0: transfers are free
  double latency_ms = 0;                   // added to every transfer between stages (at least
                                           // the engine's hand-off: message_latency_ms())
  // Pipeline replicas trained data-parallel: after each step every stage all-reduces its
  // gradients over its replicas at this bandwidth (0: free).
  int replicas = 1;
  double allreduce_bytes_per_ms = 0;
  // What the engine adds per step and per action (a profile's "engine"); 0: nothing.
  EngineCost engine;
};

// Throws std::invalid_argument for options a CostModel refuses whatever its layers: chunks,
// parameter scale, bandwidths, latency, engine costs, replicas, device speeds and memory caps
// out of range. A plan read from a file is checked so before any run is spent on it.
void check_cost_options(const CostOptions& options);

class CostModel {
 public:
  // Validates everything up front; throws std::invalid_argument saying which argument is wrong,
  // the value given and what was expected (stages < 1 or above the layer count, NaN or negative
  // costs, speeds <= 0, caps <= 0, a cap or speed count that is neither 1 nor `stages`, ...).
  CostModel(std::vector<LayerCost> layers, int stages, CostOptions options);

  int layer_count() const { return static_cast<int>(layers_.size()); }
  int stage_count() const { return stages_; }
  const std::vector<LayerCost>& layers() const { return layers_; }
  // The layers' costs with the whole mini-batch as one micro-batch, where they were measured
  // apart from the planned micro-batch's (a profile of several sizes: cost_model_for); empty
  // otherwise, and the planned micro-batch's costs are scaled in proportion. What a plan's step
  // with one micro-batch is priced from (make_plan). The setter throws std::invalid_argument
  // for another layer count.
  const std::vector<LayerCost>& whole_batch_layers() const { return whole_batch_layers_; }
  void set_whole_batch_layers(std::vector<LayerCost> layers);
  // This model's layers, stage count and whole-batch costs under other options (another
  // schedule, chosen W delays, caps): a model made anew from layers() alone would price the
  // one-micro-batch step from the planned micro-batch's costs instead.
  CostModel with_options(CostOptions options) const;
  const CostOptions& options() const { return options_; }
  // The schedule the cost model assumes, with options().chunks micro-batches.
  const pipeline::Schedule& schedule() const { return schedule_; }

  // Speed factor and memory cap of stage `stage`'s device (kUnlimitedBytes without caps).
  double speed(int stage) const { return speeds_[stage]; }
  int64_t memory_cap_bytes(int stage) const { return caps_[stage]; }
  bool has_memory_caps() const { return !options_.memory_caps_bytes.empty(); }

  // Compute time per micro-batch: forward + backward, plus the recomputed forward averaged over
  // the micro-batches that are checkpointed, divided by the stage's speed. Monotone in the extent.
  // Additive: time_ms(s, a, c) = time_ms(s, a, b) + time_ms(s, b, c). The backward counts
  // whole: where a schedule splits it, durations() has B and W as measured apart, which may
  // take longer together.
  double time_ms(int stage, int first, int end) const {  // inline: the partitioners' inner loop
    return (work_prefix_ms_[end] - work_prefix_ms_[first]) / speeds_[stage];
  }
  // The engine's cost of a stage's actions per micro-batch (F, B, R averaged over the
  // micro-batches that are checkpointed, W where the backward is split): the same for any extent.
  double overhead_ms(int stage) const { return options_.engine.action_ms * actions_[stage]; }
  // Time to send the output of layer end-1 to the next stage (one way); 0 after the last layer.
  double transfer_ms(int end) const { return transfer_ms_[end]; }
  // What every message between stages costs besides its bytes: the link's latency, and at least
  // the engine's hand-off to the receiving stage's thread (a measured link's latency, taken
  // through the engine's channels, includes it).
  double message_latency_ms() const {
    return std::max(options_.latency_ms, options_.engine.handoff_ms);
  }
  // Time of the stage's gradient all-reduce over its replicas after the step (a ring: each
  // replica sends and receives 2 (R - 1) / R of the gradient bytes); 0 with one replica.
  double allreduce_ms(int first, int end) const {
    if (options_.replicas < 2 || options_.allreduce_bytes_per_ms <= 0) return 0;
    const double r = options_.replicas;
    const double bytes = static_cast<double>(param_prefix_bytes_[end] - param_prefix_bytes_[first]);
    return 2 * (r - 1) / r * bytes / options_.allreduce_bytes_per_ms;
  }
  // What the partitioners minimise the maximum of: time_ms + overhead_ms + transfer_ms(end),
  // plus the stage's all-reduce spread over the step's micro-batches (it runs once per step: a
  // stage's share of the step is chunks x this cost).
  double cost_ms(int stage, int first, int end) const {
    return time_ms(stage, first, end) + overhead_ms(stage) + transfer_ms(end) +
           allreduce_ms(first, end) / options_.chunks;
  }
  // Peak bytes: parameters * param_scale plus the activations the schedule keeps alive on this
  // stage. Equals simulate()'s peak for memory_terms(); monotone in `end` for a fixed `first`.
  int64_t memory_bytes(int stage, int first, int end) const;

  // Per-action durations and memory terms for simulate(): compute times scaled by
  // `compute_scale` (micro-batches of another size than the profiled one), plus the engine's
  // action cost. Stage 0's input is a micro-batch of the model's input, which it holds as the
  // other stages hold theirs (on a device, a copy of the data loader's batch); 0 bytes when the
  // profile did not measure it (LayerCost::input_bytes).
  StageDurations durations(int stage, int first, int end, double compute_scale = 1.0) const;
  StageMemory memory_terms(int stage, int first, int end) const;

 private:
  std::vector<LayerCost> whole_batch_layers_;

  // The gradients sent back across a cut before layer `cut` (0 < cut < layer_count()): those of
  // the input of a stage starting there (LayerCost::input_grad_bytes, else its input's bytes).
  int64_t received_grad_bytes(int cut) const;

  // How many micro-batches hold their stage input, their full activations and what W needs
  // at the end of an action, when a stage's memory may peak.
  struct LiveCounts {
    int64_t inputs = 0;
    int64_t activations = 0;
    int64_t awaiting_weight = 0;  // past B, before W (split backwards)
    int64_t backward = 0;         // 1 while a B runs, before it frees its micro-batch
    int64_t weight = 0;           // 1 while a W runs, before it frees its micro-batch
  };

  std::vector<LayerCost> layers_;
  int stages_ = 0;
  CostOptions options_;
  pipeline::Schedule schedule_;
  std::vector<double> speeds_;
  std::vector<int64_t> caps_;
  std::vector<double> forward_prefix_ms_;  // prefix sums over layers, n + 1 entries
  std::vector<double> backward_prefix_ms_;
  std::vector<double> weight_prefix_ms_;      // the W part of backward (LayerCost::weight_ms)
  std::vector<double> input_grad_prefix_ms_;  // B when split (LayerCost::input_grad_ms)
  std::vector<double> work_prefix_ms_;        // forward * (1 + recompute share) + backward
  std::vector<int64_t> param_prefix_bytes_;
  std::vector<int64_t> activation_prefix_bytes_;
  std::vector<int64_t> weight_held_prefix_bytes_;  // LayerCost::weight_held_bytes
  std::vector<int64_t> released_output_bytes_;     // LayerCost::released_output_bytes, per layer
  // By end layer: what the model's first stage, ending there, holds from B to W when its
  // backward is split. Its input needs no gradient, so B computes nothing and keeps the whole
  // graph: its activations, and the gradients it received (its output's and the skips' it
  // sent), the roots of its W. (Its output counts, as the profile cannot tell whether a graph
  // that no B walked keeps it: LayerCost::released_output_bytes is measured after a B.) A running
  // maximum over ends, so that it never shrinks as the stage grows (the partitioners rely on it);
  // the exact sum wherever that already grows.
  std::vector<int64_t> first_weight_held_bytes_;
  // Over layers l: what a backward adds at most while at l, plus the activations of l and the
  // layers before it (LayerCost::backward_peak_bytes plus activation_prefix_bytes_[l + 1]) and
  // the gradients of the skips l carries (LayerCost::carried_bytes); a stage's B peaks at the
  // largest over its layers, less its activations. Empty when no layer's peak was measured and
  // none carries anything.
  RangeMax backward_peaks_;
  // Over layers l: backward_peaks_[l] less the parameters of l and the layers before it. The
  // first stage's W, its whole backward, keeps each new parameter gradient until its end: at l
  // it holds those of the stage's layers after l, and peaks at the largest of these plus the
  // stage's parameters.
  RangeMax whole_weight_peaks_;
  // Over layers: what a W adds at most while at the layer (LayerCost::weight_peak_bytes); a
  // later stage's W peaks at the largest over its layers. Empty when none was measured.
  RangeMax weight_peaks_;
  std::vector<double> transfer_ms_;             // by end layer, n + 1 entries
  std::vector<double> actions_;                 // [stage]: actions per micro-batch
  std::vector<std::vector<LiveCounts>> peaks_;  // [stage], Pareto-maximal counts
};

}  // namespace pipebal::balance
