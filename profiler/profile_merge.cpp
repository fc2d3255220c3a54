// See profile_merge.h.
#include "pipebal/profiler/profile_merge.h"

#include <stdexcept>

#include <fmt/format.h>

#include "pipebal/common/machine_load.h"
#include "pipebal/profiler/statistics.h"

namespace pipebal::profiler {
namespace {

void append(std::vector<double>& to, const std::vector<double>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

// Adds `round`'s samples of each layer to `pooled`'s, after checking they are the same layers.
void pool_layers(std::vector<LayerProfile>& pooled, const std::vector<LayerProfile>& round,
                 size_t round_index, const std::string& where) {
  if (round.size() != pooled.size()) {
    throw std::invalid_argument(fmt::format("profile round {} has {} layers{}, round 1 has {}",
                                            round_index + 1, round.size(), where, pooled.size()));
  }
  for (size_t i = 0; i < pooled.size(); ++i) {
    if (round[i].name != pooled[i].name || round[i].type != pooled[i].type) {
      throw std::invalid_argument(fmt::format(
          "profile round {} has layer {} '{}' ({}){}, round 1 has '{}' ({})", round_index + 1, i,
          round[i].name, round[i].type, where, pooled[i].name, pooled[i].type));
    }
    append(pooled[i].forward_samples_ms, round[i].forward_samples_ms);
    append(pooled[i].backward_samples_ms, round[i].backward_samples_ms);
    append(pooled[i].weight_samples_ms, round[i].weight_samples_ms);
    append(pooled[i].input_grad_samples_ms, round[i].input_grad_samples_ms);
  }
}

}  // namespace

namespace {

// One kind of sample (e.g. the forwards) of every layer, sample i of each taken in pass i.
using Samples = std::vector<double> LayerProfile::*;

// The median over passes of a pass's total (its layers' samples of `kinds` summed) over the sum
// of the layers' own medians; 1 when the layers do not hold one sample per pass each.
double pass_factor(const std::vector<LayerProfile>& layers, const std::vector<Samples>& kinds) {
  const size_t passes = (layers.front().*kinds.front()).size();
  double sum_of_medians = 0;
  std::vector<double> totals(passes, 0.0);
  for (const LayerProfile& layer : layers) {
    for (const Samples kind : kinds) {
      const std::vector<double>& samples = layer.*kind;
      if (samples.size() != passes || passes == 0) return 1.0;
      sum_of_medians += median(samples);
      for (size_t i = 0; i < passes; ++i) totals[i] += samples[i];
    }
  }
  return sum_of_medians > 0 ? median(totals) / sum_of_medians : 1.0;
}

}  // namespace

void summarise_passes(std::vector<LayerProfile>& layers) {
  if (layers.empty()) return;
  const double forward = pass_factor(layers, {&LayerProfile::forward_samples_ms});
  const double backward = pass_factor(layers, {&LayerProfile::backward_samples_ms});
  const double split =
      pass_factor(layers, {&LayerProfile::input_grad_samples_ms, &LayerProfile::weight_samples_ms});
  for (LayerProfile& layer : layers) {
    layer.forward_ms = forward * median(layer.forward_samples_ms);
    layer.forward_p10_ms = forward * percentile(layer.forward_samples_ms, 10);
    layer.forward_p90_ms = forward * percentile(layer.forward_samples_ms, 90);
    layer.backward_ms = backward * median(layer.backward_samples_ms);
    layer.backward_p10_ms = backward * percentile(layer.backward_samples_ms, 10);
    layer.backward_p90_ms = backward * percentile(layer.backward_samples_ms, 90);
    if (!layer.weight_samples_ms.empty()) {
      layer.weight_ms = split * median(layer.weight_samples_ms);
    }
    if (!layer.input_grad_samples_ms.empty()) {
      layer.input_grad_ms = split * median(layer.input_grad_samples_ms);
    }
  }
}

Profile merge_profiles(const std::vector<Profile>& rounds) {
  if (rounds.empty()) throw std::invalid_argument("merge_profiles: no profile to merge");
  Profile pooled = rounds.front();
  for (size_t r = 1; r < rounds.size(); ++r) {
    const Profile& round = rounds[r];
    pool_layers(pooled.layers, round.layers, r, "");
    if (round.sizes.size() != pooled.sizes.size()) {
      throw std::invalid_argument(
          fmt::format("profile round {} has {} micro-batch sizes, round 1 "
                      "has {}",
                      r + 1, round.sizes.size(), pooled.sizes.size()));
    }
    for (size_t k = 0; k < pooled.sizes.size(); ++k) {
      Profile::Size& size = pooled.sizes[k];
      if (round.sizes[k].micro_batch_size != size.micro_batch_size) {
        throw std::invalid_argument(
            fmt::format("profile round {} has micro-batch size {} where round 1 has {}", r + 1,
                        round.sizes[k].micro_batch_size, size.micro_batch_size));
      }
      pool_layers(size.layers, round.sizes[k].layers, r,
                  fmt::format(" at micro-batch size {}", size.micro_batch_size));
    }
  }
  std::vector<double> step_ms, action_ms, handoff_ms;
  for (const Profile& round : rounds) {
    if (!round.engine) continue;
    step_ms.push_back(round.engine->step_ms);
    action_ms.push_back(round.engine->action_ms);
    handoff_ms.push_back(round.engine->handoff_ms);
  }
  if (!step_ms.empty()) {
    pooled.engine = balance::EngineCost{median(step_ms), median(action_ms), median(handoff_ms)};
  }
  std::vector<std::optional<MachineLoad>> loads;
  for (const Profile& round : rounds) loads.push_back(round.environment.machine_load);
  pooled.environment.machine_load = combine_loads(loads);
  summarise_passes(pooled.layers);
  for (Profile::Size& size : pooled.sizes) {
    summarise_passes(size.layers);
  }
  return pooled;
}

}  // namespace pipebal::profiler
