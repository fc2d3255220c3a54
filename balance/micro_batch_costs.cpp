// See micro_batch_costs.h.
#include "pipebal/balance/micro_batch_costs.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace pipebal::balance {
namespace {

int64_t round_bytes(double bytes) {
  return static_cast<int64_t>(std::llround(std::clamp(bytes, 0.0, double(kMaxLayerBytes))));
}

// Byte counts where -1 means "not measured" stay so; the others are rounded into range.
int64_t mix_bytes(int64_t a, int64_t b, double t) {
  if (a < 0 || b < 0) return -1;
  return round_bytes(double(a) + double(b - a) * t);
}
int64_t scale_bytes(int64_t bytes, double factor) {
  return bytes < 0 ? -1 : round_bytes(double(bytes) * factor);
}
// `bytes`, of which what exceeds `fixed` grows by `factor` (-1, not measured, stays).
int64_t scale_beyond(int64_t bytes, int64_t fixed, double factor) {
  if (bytes <= fixed) return bytes;
  return round_bytes(double(fixed) + double(bytes - fixed) * factor);
}

// a + (b - a) * t for every size-dependent field; names and parameters from `a`.
std::vector<LayerCost> blend(const std::vector<LayerCost>& a, const std::vector<LayerCost>& b,
                             double t) {
  std::vector<LayerCost> out = a;
  for (size_t i = 0; i < out.size(); ++i) {
    const auto mix = [t](double x, double y) { return x + (y - x) * t; };
    out[i].forward_ms = mix(a[i].forward_ms, b[i].forward_ms);
    out[i].backward_ms = mix(a[i].backward_ms, b[i].backward_ms);
    out[i].weight_ms = mix(a[i].weight_ms, b[i].weight_ms);
    out[i].input_grad_ms = a[i].input_grad_ms < 0 || b[i].input_grad_ms < 0
                               ? -1.0
                               : mix(a[i].input_grad_ms, b[i].input_grad_ms);
    out[i].activation_bytes = mix_bytes(a[i].activation_bytes, b[i].activation_bytes, t);
    out[i].output_bytes = mix_bytes(a[i].output_bytes, b[i].output_bytes, t);
    out[i].input_bytes = mix_bytes(a[i].input_bytes, b[i].input_bytes, t);
    out[i].input_grad_bytes = mix_bytes(a[i].input_grad_bytes, b[i].input_grad_bytes, t);
    out[i].carried_bytes = mix_bytes(a[i].carried_bytes, b[i].carried_bytes, t);
    out[i].kept_grad_bytes = mix_bytes(a[i].kept_grad_bytes, b[i].kept_grad_bytes, t);
    out[i].peak_bytes = mix_bytes(a[i].peak_bytes, b[i].peak_bytes, t);
    out[i].backward_peak_bytes = mix_bytes(a[i].backward_peak_bytes, b[i].backward_peak_bytes, t);
    out[i].weight_held_bytes = mix_bytes(a[i].weight_held_bytes, b[i].weight_held_bytes, t);
    out[i].released_output_bytes =
        mix_bytes(a[i].released_output_bytes, b[i].released_output_bytes, t);
    out[i].weight_peak_bytes = mix_bytes(a[i].weight_peak_bytes, b[i].weight_peak_bytes, t);
  }
  return out;
}

std::vector<LayerCost> scale(const std::vector<LayerCost>& layers, double factor) {
  std::vector<LayerCost> out = layers;
  for (LayerCost& layer : out) {
    layer.forward_ms = std::min(layer.forward_ms * factor, kMaxLayerMs);
    layer.backward_ms = std::min(layer.backward_ms * factor, kMaxLayerMs);
    layer.weight_ms = std::min(layer.weight_ms * factor, kMaxLayerMs);
    if (layer.input_grad_ms >= 0) {
      layer.input_grad_ms = std::min(layer.input_grad_ms * factor, kMaxLayerMs);
    }
    layer.activation_bytes = scale_bytes(layer.activation_bytes, factor);
    layer.output_bytes = scale_bytes(layer.output_bytes, factor);
    layer.input_bytes = scale_bytes(layer.input_bytes, factor);
    layer.input_grad_bytes = scale_bytes(layer.input_grad_bytes, factor);
    layer.carried_bytes = scale_bytes(layer.carried_bytes, factor);
    layer.kept_grad_bytes = scale_bytes(layer.kept_grad_bytes, factor);
    layer.weight_held_bytes = scale_bytes(layer.weight_held_bytes, factor);
    layer.released_output_bytes = scale_bytes(layer.released_output_bytes, factor);
    // The parameters' gradients in a peak do not grow with the micro-batch; the rest does.
    layer.peak_bytes = scale_beyond(layer.peak_bytes, layer.param_bytes, factor);
    layer.backward_peak_bytes = scale_beyond(layer.backward_peak_bytes, layer.param_bytes, factor);
    layer.weight_peak_bytes = scale_beyond(layer.weight_peak_bytes, layer.param_bytes, factor);
  }
  return out;
}

}  // namespace

const char* to_string(CostSource source) {
  switch (source) {
    case CostSource::kMeasured:
      return "measured";
    case CostSource::kInterpolated:
      return "interpolated";
    case CostSource::kExtrapolated:
      return "extrapolated";
  }
  return "measured";
}

int64_t micro_batch_size(int64_t mini_batch, int chunks) {
  if (chunks < 1) throw std::invalid_argument(fmt::format("chunks must be >= 1, got {}", chunks));
  return (mini_batch + chunks - 1) / chunks;
}

std::vector<int64_t> measured_sizes(const CostProfile& profile) {
  std::vector<int64_t> sizes;
  for (const SizedCosts& sized : profile.sizes) sizes.push_back(sized.micro_batch_size);
  if (sizes.empty() && profile.batch_size > 0) sizes.push_back(profile.batch_size);
  return sizes;
}

CostsAtSize costs_at_micro_batch_size(const CostProfile& profile, int64_t size) {
  if (size < 1) {
    throw std::invalid_argument(fmt::format("micro-batch size must be >= 1, got {}", size));
  }
  CostsAtSize out;
  out.micro_batch_size = size;
  // (size, layers) pairs, ascending: sizes[] or the primary layers alone.
  std::vector<const SizedCosts*> table;
  for (const SizedCosts& sized : profile.sizes) table.push_back(&sized);
  SizedCosts primary;
  if (table.empty()) {
    if (profile.batch_size <= 0) {
      out.layers = profile.layers;
      return out;
    }
    primary.micro_batch_size = profile.batch_size;
    primary.layers = profile.layers;
    table.push_back(&primary);
  }
  const auto above = std::lower_bound(
      table.begin(), table.end(), size,
      [](const SizedCosts* sized, int64_t s) { return sized->micro_batch_size < s; });
  if (above != table.end() && (*above)->micro_batch_size == size) {
    out.layers = (*above)->layers;
    return out;
  }
  if (above == table.begin() || above == table.end()) {
    const SizedCosts& nearest = above == table.begin() ? *table.front() : *table.back();
    out.layers = scale(nearest.layers, double(size) / double(nearest.micro_batch_size));
    out.source = CostSource::kExtrapolated;
    return out;
  }
  const SizedCosts& low = **(above - 1);
  const SizedCosts& high = **above;
  const double t =
      double(size - low.micro_batch_size) / double(high.micro_batch_size - low.micro_batch_size);
  out.layers = blend(low.layers, high.layers, t);
  out.source = CostSource::kInterpolated;
  return out;
}

std::vector<LayerCost> layers_for_chunks(const CostProfile& profile, int chunks) {
  const int64_t mini = profile.mini_batch_size();
  if (mini <= 0 || profile.batch_size <= 0) return profile.layers;
  return costs_at_micro_batch_size(profile, micro_batch_size(mini, chunks)).layers;
}

CostModel cost_model_for(const CostProfile& profile, int stages, const CostOptions& options) {
  const int64_t mini = profile.mini_batch_size();
  if (mini <= 0 || profile.batch_size <= 0) return CostModel(profile.layers, stages, options);
  CostModel model(costs_at_micro_batch_size(profile, micro_batch_size(mini, options.chunks)).layers,
                  stages, options);
  if (profile.sizes.size() > 1 && options.chunks > 1) {
    model.set_whole_batch_layers(costs_at_micro_batch_size(profile, mini).layers);
  }
  return model;
}

}  // namespace pipebal::balance
