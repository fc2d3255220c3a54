// See profile_merge.h.
#include "profiler/profile_merge.h"

#include <stdexcept>

#include <fmt/format.h>

#include "profiler/statistics.h"

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

void summarise_samples(LayerProfile& layer) {
  layer.forward_ms = median(layer.forward_samples_ms);
  layer.forward_p10_ms = percentile(layer.forward_samples_ms, 10);
  layer.forward_p90_ms = percentile(layer.forward_samples_ms, 90);
  layer.backward_ms = median(layer.backward_samples_ms);
  layer.backward_p10_ms = percentile(layer.backward_samples_ms, 10);
  layer.backward_p90_ms = percentile(layer.backward_samples_ms, 90);
  if (!layer.weight_samples_ms.empty()) layer.weight_ms = median(layer.weight_samples_ms);
  if (!layer.input_grad_samples_ms.empty()) {
    layer.input_grad_ms = median(layer.input_grad_samples_ms);
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
  std::vector<double> step_ms, action_ms;
  for (const Profile& round : rounds) {
    if (!round.engine) continue;
    step_ms.push_back(round.engine->step_ms);
    action_ms.push_back(round.engine->action_ms);
  }
  if (!step_ms.empty()) pooled.engine = balance::EngineCost{median(step_ms), median(action_ms)};
  for (LayerProfile& layer : pooled.layers) summarise_samples(layer);
  for (Profile::Size& size : pooled.sizes) {
    for (LayerProfile& layer : size.layers) summarise_samples(layer);
  }
  return pooled;
}

}  // namespace pipebal::profiler
