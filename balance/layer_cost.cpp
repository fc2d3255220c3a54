// See layer_cost.h.
#include "pipebal/balance/layer_cost.h"

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace pipebal::balance {
namespace {

// "layer 3 ('fc2')", or "layer 3" where the profile names none.
std::string describe(size_t index, const LayerCost& layer) {
  return layer.name.empty() ? fmt::format("layer {}", index)
                            : fmt::format("layer {} ('{}')", index, layer.name);
}

void check_ms(size_t index, const LayerCost& layer, const char* field, double value) {
  if (!std::isfinite(value) || value < 0 || value > kMaxLayerMs) {
    throw std::invalid_argument(
        fmt::format("{}: {} is {}, expected a finite value from 0 to {:g} ms",
                    describe(index, layer), field, value, kMaxLayerMs));
  }
}

void check_bytes(size_t index, const LayerCost& layer, const char* field, int64_t value) {
  if (value < 0 || value > kMaxLayerBytes) {
    throw std::invalid_argument(fmt::format("{}: {} is {}, expected 0 to {} (4 TiB) bytes",
                                            describe(index, layer), field, value, kMaxLayerBytes));
  }
}

}  // namespace

void validate_layer_costs(const std::vector<LayerCost>& layers) {
  if (layers.size() > kMaxLayers) {
    throw std::invalid_argument(
        fmt::format("{} layers: pipebal plans at most {}", layers.size(), kMaxLayers));
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerCost& layer = layers[i];
    check_ms(i, layer, "forward_ms", layer.forward_ms);
    check_ms(i, layer, "backward_ms", layer.backward_ms);
    check_ms(i, layer, "weight_ms", layer.weight_ms);
    check_bytes(i, layer, "param_bytes", layer.param_bytes);
    check_bytes(i, layer, "activation_bytes", layer.activation_bytes);
    check_bytes(i, layer, "output_bytes", layer.output_bytes);
    check_bytes(i, layer, "kept_grad_bytes", layer.kept_grad_bytes);
    check_bytes(i, layer, "peak_bytes", layer.peak_bytes);
    check_bytes(i, layer, "weight_peak_bytes", layer.weight_peak_bytes);
    check_bytes(i, layer, "carried_bytes", layer.carried_bytes);
    check_bytes(i, layer, "released_output_bytes", layer.released_output_bytes);
    // -1: not measured.
    if (layer.input_grad_ms != -1) check_ms(i, layer, "input_grad_ms", layer.input_grad_ms);
    if (layer.input_bytes != -1) check_bytes(i, layer, "input_bytes", layer.input_bytes);
    if (layer.input_grad_bytes != -1) {
      check_bytes(i, layer, "input_grad_bytes", layer.input_grad_bytes);
    }
    if (layer.backward_peak_bytes != -1) {
      check_bytes(i, layer, "backward_peak_bytes", layer.backward_peak_bytes);
    }
    if (layer.weight_held_bytes != -1) {
      check_bytes(i, layer, "weight_held_bytes", layer.weight_held_bytes);
    }
  }
}

int measured_chunks(const CostProfile& profile) {
  if (profile.chunks > 0) return profile.chunks;
  const int64_t mini = profile.mini_batch_size();
  if (mini <= 0 || profile.batch_size <= 0 || profile.batch_size > mini) return 0;
  // At most mini (int-sized: input_shape's entries are), and its micro-batches the measured size
  // unless no count cuts the mini-batch that way (10 samples in micro-batches of 6).
  const int64_t chunks = (mini + profile.batch_size - 1) / profile.batch_size;
  const bool cuts_it = (mini + chunks - 1) / chunks == profile.batch_size;
  return cuts_it && chunks <= INT32_MAX ? static_cast<int>(chunks) : 0;
}

int planned_chunks(const CostProfile& profile, int requested) {
  if (requested < 0) {
    throw std::invalid_argument(fmt::format("--chunks must be at least 1, got {}", requested));
  }
  const int measured = measured_chunks(profile);
  if (requested == 0) return measured > 0 ? measured : pipeline::kDefaultChunks;
  if (measured == 0 || requested == measured) return requested;
  const int64_t mini = profile.mini_batch_size();
  if (mini > 0 && profile.batch_size > 0) {
    if (requested > mini) {
      throw std::invalid_argument(fmt::format(
          "--chunks {} is more than the profiled mini-batch of {} samples", requested, mini));
    }
    const int64_t micro = (mini + requested - 1) / requested;
    if (micro == profile.batch_size) return requested;  // the same micro-batches, rounded
    if (profile.sizes.size() > 1 && micro >= profile.sizes.front().micro_batch_size &&
        micro <= profile.sizes.back().micro_batch_size) {
      return requested;  // interpolated between measured sizes (balance/micro_batch_costs.h)
    }
    if (profile.sizes.size() > 1) {
      throw std::invalid_argument(fmt::format(
          "--chunks {} means micro-batches of {} samples, outside the profiled sizes {} to {}: "
          "profile with --chunks {} among the counts",
          requested, micro, profile.sizes.front().micro_batch_size,
          profile.sizes.back().micro_batch_size, requested));
    }
    throw std::invalid_argument(fmt::format(
        "the profile was measured at micro-batch size {} ({} samples in {} chunks); --chunks {} "
        "means micro-batches of {}: profile again with --chunks {}",
        profile.batch_size, mini, measured, requested, micro, requested));
  }
  throw std::invalid_argument(
      fmt::format("the profile was measured for {} chunks, not {}: profile again with --chunks {}",
                  measured, requested, requested));
}

bool is_float_dtype_name(const std::string& dtype) {
  for (const char* name : {"", "float32", "float64", "float16", "bfloat16"}) {
    if (dtype == name) return true;
  }
  return false;
}

}  // namespace pipebal::balance
