// See cost_model.h.
#include "pipebal/balance/cost_model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

namespace pipebal::balance {
namespace {

using pipeline::ActionKind;

template <typename T>
std::vector<T> per_stage(const std::vector<T>& values, int stages, T fallback, const char* what) {
  if (values.empty()) return std::vector<T>(stages, fallback);
  if (values.size() == 1) return std::vector<T>(stages, values[0]);
  if (values.size() != static_cast<size_t>(stages)) {
    throw std::invalid_argument(
        fmt::format("{}: {} values for {} stages (give one for every stage or one per stage)", what,
                    values.size(), stages));
  }
  return values;
}

// One value per device to one per stage, stage s on device s % devices (interleaved).
template <typename T>
void expand_per_device(std::vector<T>& values, size_t devices, int stages) {
  if (values.size() != devices || devices < 2) return;
  std::vector<T> per_stage;
  for (int s = 0; s < stages; ++s) per_stage.push_back(values[s % devices]);
  values = per_stage;
}

void validate(const std::vector<LayerCost>& layers, int stages, const CostOptions& options) {
  if (stages < 1) {
    throw std::invalid_argument(fmt::format("stages must be at least 1, got {}", stages));
  }
  if (layers.empty()) throw std::invalid_argument("the profile has no layers");
  if (static_cast<size_t>(stages) > layers.size()) {
    throw std::invalid_argument(
        fmt::format("{} stages need at least {} layers, the profile has {} (no stage may be empty)",
                    stages, stages, layers.size()));
  }
  check_cost_options(options);
  validate_layer_costs(layers);
  if (int64_t{stages} * static_cast<int64_t>(layers.size()) > kMaxStageLayerPairs) {
    throw std::invalid_argument(fmt::format(
        "{} layers into {} stages: pipebal balances at most {} stage-layer pairs (their product)",
        layers.size(), stages, kMaxStageLayerPairs));
  }
}

}  // namespace

void check_cost_options(const CostOptions& options) {
  if (options.chunks < 1) {
    throw std::invalid_argument(fmt::format("chunks must be at least 1, got {}", options.chunks));
  }
  if (!(options.param_scale >= 0 && options.param_scale <= 1e6)) {
    throw std::invalid_argument(
        fmt::format("param scale must be from 0 to 1e6, got {}", options.param_scale));
  }
  // 0 means free transfers; a real link moves at least a byte a second.
  auto check_bandwidth = [](double bytes_per_ms, const char* what) {
    if (std::isnan(bytes_per_ms) || bytes_per_ms < 0 || (bytes_per_ms > 0 && bytes_per_ms < 1e-3)) {
      throw std::invalid_argument(fmt::format(
          "{} must be at least 1 byte/s (or 0: free), got {} bytes/ms", what, bytes_per_ms));
    }
  };
  check_bandwidth(options.bandwidth_bytes_per_ms, "bandwidth");
  check_bandwidth(options.allreduce_bytes_per_ms, "all-reduce bandwidth");
  if (!(options.latency_ms >= 0 && options.latency_ms <= 1e6)) {
    throw std::invalid_argument(
        fmt::format("link latency must be from 0 to 1e6 ms, got {}", options.latency_ms));
  }
  for (const double ms :
       {options.engine.step_ms, options.engine.action_ms, options.engine.handoff_ms}) {
    if (!(ms >= 0 && ms <= kMaxEngineMs)) {
      throw std::invalid_argument(
          fmt::format("the engine's costs must be from 0 to {:g} ms, got {}", kMaxEngineMs, ms));
    }
  }
  if (options.replicas < 1 || options.replicas > 4096) {
    throw std::invalid_argument(
        fmt::format("replicas must be from 1 to 4096, got {}", options.replicas));
  }
  for (size_t s = 0; s < options.device_speeds.size(); ++s) {
    const double speed = options.device_speeds[s];
    if (!(speed >= 1e-6 && speed <= 1e6)) {
      throw std::invalid_argument(fmt::format(
          "device {}'s speed is {}, expected a relative speed from 1e-6 to 1e6", s, speed));
    }
  }
  for (size_t s = 0; s < options.memory_caps_bytes.size(); ++s) {
    if (options.memory_caps_bytes[s] <= 0) {
      throw std::invalid_argument(
          fmt::format("device {}'s memory cap is {} bytes, expected more than 0", s,
                      options.memory_caps_bytes[s]));
    }
  }
}

void CostModel::set_whole_batch_layers(std::vector<LayerCost> layers) {
  if (layers.size() != layers_.size()) {
    throw std::invalid_argument(fmt::format("whole-batch costs of {} layers for a model of {}",
                                            layers.size(), layers_.size()));
  }
  whole_batch_layers_ = std::move(layers);
}

CostModel CostModel::with_options(CostOptions options) const {
  CostModel model(layers_, stages_, std::move(options));
  model.whole_batch_layers_ = whole_batch_layers_;
  return model;
}

CostModel::CostModel(std::vector<LayerCost> layers, int stages, CostOptions options)
    : layers_(std::move(layers)), stages_(stages), options_(std::move(options)) {
  validate(layers_, stages_, options_);
  schedule_ =
      pipeline::make_schedule(options_.schedule, stages_, options_.chunks, options_.checkpoint,
                              options_.virtual_stages, options_.weight_delays);
  if (schedule_.virtual_stages > 1) {
    // Speeds and caps may be given per device: each stage runs at its device's speed, and
    // memory_cap_bytes(s) is its device's cap, which the device's stages share (fits_memory).
    const size_t devices = static_cast<size_t>(schedule_.devices());
    expand_per_device(options_.device_speeds, devices, stages_);
    expand_per_device(options_.memory_caps_bytes, devices, stages_);
  }
  speeds_ = per_stage(options_.device_speeds, stages_, 1.0, "device speeds");
  caps_ = per_stage(options_.memory_caps_bytes, stages_, kUnlimitedBytes, "memory caps");

  int checkpointed = 0;
  for (int i = 0; i < options_.chunks; ++i) {
    checkpointed += pipeline::is_checkpointed(options_.checkpoint, i, options_.chunks) ? 1 : 0;
  }
  const double recompute_share = static_cast<double>(checkpointed) / options_.chunks;
  for (int s = 0; s < stages_; ++s) {
    actions_.push_back(2.0 + recompute_share + (schedule_.splits(s) ? 1.0 : 0.0));
  }

  const size_t n = layers_.size();
  forward_prefix_ms_.assign(n + 1, 0.0);
  backward_prefix_ms_.assign(n + 1, 0.0);
  weight_prefix_ms_.assign(n + 1, 0.0);
  input_grad_prefix_ms_.assign(n + 1, 0.0);
  work_prefix_ms_.assign(n + 1, 0.0);
  param_prefix_bytes_.assign(n + 1, 0);
  activation_prefix_bytes_.assign(n + 1, 0);
  weight_held_prefix_bytes_.assign(n + 1, 0);
  released_output_bytes_.assign(n, 0);
  transfer_ms_.assign(n + 1, 0.0);
  for (size_t l = 0; l < n; ++l) {
    const LayerCost& layer = layers_[l];
    forward_prefix_ms_[l + 1] = forward_prefix_ms_[l] + layer.forward_ms;
    backward_prefix_ms_[l + 1] = backward_prefix_ms_[l] + layer.backward_ms;
    const double weight = std::min(layer.weight_ms, layer.backward_ms);
    weight_prefix_ms_[l + 1] = weight_prefix_ms_[l] + weight;
    input_grad_prefix_ms_[l + 1] =
        input_grad_prefix_ms_[l] +
        (layer.input_grad_ms >= 0 ? layer.input_grad_ms : layer.backward_ms - weight);
    work_prefix_ms_[l + 1] =
        work_prefix_ms_[l] + layer.forward_ms * (1.0 + recompute_share) + layer.backward_ms;
    param_prefix_bytes_[l + 1] = param_prefix_bytes_[l] + layer.param_bytes;
    activation_prefix_bytes_[l + 1] = activation_prefix_bytes_[l] + layer.activation_bytes;
    // Not measured (a profile from before): all the activations and the kept gradients.
    const int64_t held = layer.weight_held_bytes >= 0
                             ? layer.weight_held_bytes
                             : layer.activation_bytes + layer.kept_grad_bytes;
    weight_held_prefix_bytes_[l + 1] = weight_held_prefix_bytes_[l] + held;
    // At most what it is part of, so that a stage's terms still grow with it.
    released_output_bytes_[l] = std::min(layer.released_output_bytes, held);
    // An infinite bandwidth is as free as 0.
    if (l + 1 < n && options_.bandwidth_bytes_per_ms > 0) {
      transfer_ms_[l + 1] =
          static_cast<double>(layer.output_bytes) / options_.bandwidth_bytes_per_ms;
    }
    if (l + 1 < n) transfer_ms_[l + 1] += message_latency_ms();
  }
  first_weight_held_bytes_.assign(n + 1, 0);
  for (size_t end = 1; end <= n; ++end) {
    const int64_t received = end < n ? received_grad_bytes(static_cast<int>(end)) : 0;
    first_weight_held_bytes_[end] =
        std::max(first_weight_held_bytes_[end - 1], activation_prefix_bytes_[end] + received);
  }
  if (std::any_of(layers_.begin(), layers_.end(), [](const LayerCost& l) {
        return l.peak_bytes > 0 || l.backward_peak_bytes > 0 || l.carried_bytes > 0;
      })) {
    std::vector<int64_t> peaks(n);
    for (size_t l = 0; l < n; ++l) {
      // A layer's B holds the activations of the stage's earlier layers (their B comes later),
      // its own, and above those what its backward adds, its parameters' gradients included:
      // each B makes them anew and only then adds them to those the stage holds throughout
      // (CostOptions::param_scale). A profile from before the backward's own peak was measured
      // has the forward's and backward's together, an upper bound (the forward's transients,
      // freed before the backward, count too); unmeasured, nothing. Besides, the gradients of
      // the skips the layer only carries are alive: made by the later layer that took them (or
      // received, when that is past the stage's end), kept for the earlier one that made them
      // (or sent back). The layer's own measurement never sees them.
      const LayerCost& layer = layers_[l];
      const int64_t above = layer.backward_peak_bytes >= 0 ? layer.backward_peak_bytes
                            : layer.peak_bytes > 0 ? layer.peak_bytes - layer.activation_bytes
                                                   : 0;
      peaks[l] =
          activation_prefix_bytes_[l + 1] + std::max<int64_t>(0, above) + layer.carried_bytes;
    }
    // The first stage's W keeps each new parameter gradient until its end: at l it holds those
    // of the stage's layers after l too (added below, per stage).
    std::vector<int64_t> whole(n);
    for (size_t l = 0; l < n; ++l) whole[l] = peaks[l] - param_prefix_bytes_[l + 1];
    whole_weight_peaks_ = RangeMax(std::move(whole));
    backward_peaks_ = RangeMax(std::move(peaks));
  }
  if (std::any_of(layers_.begin(), layers_.end(),
                  [](const LayerCost& l) { return l.weight_peak_bytes > 0; })) {
    std::vector<int64_t> peaks(n);
    for (size_t l = 0; l < n; ++l) peaks[l] = layers_[l].weight_peak_bytes;
    weight_peaks_ = RangeMax(std::move(peaks));
  }

  // Walk each stage's action list once with symbolic sizes; the peak of any partition is then
  // the maximum of a few linear terms, cheap enough for the partitioners' inner loops.
  peaks_.resize(stages_);
  for (int s = 0; s < stages_; ++s) {
    const bool split = schedule_.splits(s);
    LiveCounts live;
    std::vector<LiveCounts> candidates;
    for (const pipeline::Action& action : schedule_.actions[s]) {
      const bool stashed =
          pipeline::is_checkpointed(options_.checkpoint, action.micro_batch, options_.chunks);
      switch (action.kind) {
        case ActionKind::kForward:
          ++live.inputs;
          if (!stashed) ++live.activations;
          break;
        case ActionKind::kRecompute:
          ++live.activations;
          break;
        case ActionKind::kBackward:  // a split one keeps the input for W
          ++live.backward;
          candidates.push_back(live);
          --live.backward;
          --live.activations;
          if (split) {
            ++live.awaiting_weight;
          } else {
            --live.inputs;
          }
          break;
        case ActionKind::kWeight:  // what it held for W is part of the W's own term
          --live.awaiting_weight;
          ++live.weight;
          candidates.push_back(live);
          --live.weight;
          --live.inputs;
          break;
      }
      candidates.push_back(live);
    }
    // Keep the Pareto-maximal counts: in descending order no count can exceed an earlier one
    // in every term, so a count survives when no survivor so far holds at least as much.
    std::sort(candidates.begin(), candidates.end(), [](const LiveCounts& a, const LiveCounts& b) {
      return std::tie(a.inputs, a.activations, a.awaiting_weight, a.backward, a.weight) >
             std::tie(b.inputs, b.activations, b.awaiting_weight, b.backward, b.weight);
    });
    for (const LiveCounts& c : candidates) {
      const bool dominated =
          std::any_of(peaks_[s].begin(), peaks_[s].end(), [&](const LiveCounts& kept) {
            return kept.inputs >= c.inputs && kept.activations >= c.activations &&
                   kept.awaiting_weight >= c.awaiting_weight && kept.backward >= c.backward &&
                   kept.weight >= c.weight;
          });
      if (!dominated) peaks_[s].push_back(c);
    }
  }
}

int64_t CostModel::received_grad_bytes(int cut) const {
  const LayerCost& layer = layers_[cut];
  if (layer.input_grad_bytes >= 0) return layer.input_grad_bytes;
  return layer.input_bytes >= 0 ? layer.input_bytes : layers_[cut - 1].output_bytes;
}

int64_t CostModel::memory_bytes(int stage, int first, int end) const {
  const StageMemory terms = memory_terms(stage, first, end);
  // Counts times bytes may pass 2^63 for absurd inputs: compute wide, saturate (no cap fits).
  __int128 live_bytes = 0;
  for (const LiveCounts& c : peaks_[stage]) {
    live_bytes = std::max(live_bytes, __int128{c.inputs} * terms.input_bytes +
                                          __int128{c.activations} * terms.activation_bytes +
                                          __int128{c.awaiting_weight} * terms.weight_bytes +
                                          __int128{c.backward} * terms.backward_bytes +
                                          __int128{c.weight} * terms.weight_run_bytes);
  }
  const __int128 total = __int128{terms.fixed_bytes} + live_bytes;
  return total >= kUnlimitedBytes ? kUnlimitedBytes : static_cast<int64_t>(total);
}

StageDurations CostModel::durations(int stage, int first, int end, double compute_scale) const {
  const double scale = compute_scale / speeds_[stage];
  const double action = options_.engine.action_ms;
  StageDurations d;
  d.forward_ms = (forward_prefix_ms_[end] - forward_prefix_ms_[first]) * scale + action;
  d.recompute_ms = d.forward_ms;
  const double backward = (backward_prefix_ms_[end] - backward_prefix_ms_[first]) * scale;
  d.backward_ms = backward + action;
  if (schedule_.splits(stage)) {
    // B and W as measured apart: together they can take longer than the backward whole. The
    // model's first stage has no input gradient to compute: its B is the engine's action alone,
    // and its W the whole backward (pipeline/split_backward.h).
    if (first == 0) {
      d.weight_ms = backward + action;
      d.backward_ms = action;
    } else {
      d.weight_ms = (weight_prefix_ms_[end] - weight_prefix_ms_[first]) * scale + action;
      d.backward_ms = (input_grad_prefix_ms_[end] - input_grad_prefix_ms_[first]) * scale + action;
    }
  }
  return d;
}

StageMemory CostModel::memory_terms(int stage, int first, int end) const {
  StageMemory terms;
  const double params = static_cast<double>(param_prefix_bytes_[end] - param_prefix_bytes_[first]);
  const double fixed = params * options_.param_scale;
  terms.fixed_bytes = fixed >= 9.2e18 ? kUnlimitedBytes : static_cast<int64_t>(std::llround(fixed));
  // Stage 0 holds its micro-batches of the model's input too (copies on its device), when the
  // profile measured them.
  const int64_t measured_input = layers_[first].input_bytes;
  terms.input_bytes = measured_input >= 0 ? measured_input
                      : first > 0         ? layers_[first - 1].output_bytes
                                          : 0;
  terms.activation_bytes = activation_prefix_bytes_[end] - activation_prefix_bytes_[first];
  // It sends what the next stage takes as its input, and back the gradient of its own input.
  if (end < layer_count()) {
    const int64_t next_input = layers_[end].input_bytes;
    terms.output_bytes = next_input >= 0 ? next_input : layers_[end - 1].output_bytes;
  }
  if (first > 0) terms.input_grad_bytes = received_grad_bytes(first);
  if (schedule_.splits(stage)) {
    // The stage's last layer's output is sent, not held for W, unless its own graph keeps it.
    terms.weight_bytes = first == 0
                             ? first_weight_held_bytes_[end]
                             : weight_held_prefix_bytes_[end] - weight_held_prefix_bytes_[first] -
                                   released_output_bytes_[end - 1];
  }
  if (!backward_peaks_.empty() && end > first) {
    terms.backward_bytes =
        std::max<int64_t>(0, backward_peaks_.max(first, end) - activation_prefix_bytes_[end]);
  }
  // The first stage's W is its whole backward, in one run that walks down the micro-batch's
  // activations as a B does, freeing them as it goes, and keeps every parameter's new gradient
  // until its end, where it adds them all (unmeasured: all of them above what it held).
  // Later stages' Ws run layer by layer, adding as they go: they hold what they held for W, and
  // above it the largest layer's W transient. (Monotone in `end`, as the dp needs: every term
  // only grows.)
  if (schedule_.splits(stage) && first == 0) {
    terms.weight_run_bytes = backward_peaks_.empty()
                                 ? terms.weight_bytes + param_prefix_bytes_[end]
                                 : whole_weight_peaks_.max(first, end) + param_prefix_bytes_[end];
  } else if (schedule_.splits(stage)) {
    const bool measured = !weight_peaks_.empty() && end > first;
    terms.weight_run_bytes = terms.weight_bytes + (measured ? weight_peaks_.max(first, end) : 0);
  }
  return terms;
}

}  // namespace pipebal::balance
