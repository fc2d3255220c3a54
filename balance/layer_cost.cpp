// See layer_cost.h.
#include "balance/layer_cost.h"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace pipebal::balance {
namespace {

[[noreturn]] void reject(size_t index, const LayerCost& layer, const char* field,
                         const std::string& value) {
  throw std::invalid_argument(fmt::format("layer {} ('{}'): {} is {}, expected a finite value >= 0",
                                          index, layer.name, field, value));
}

void check_ms(size_t index, const LayerCost& layer, const char* field, double value) {
  if (!std::isfinite(value) || value < 0) reject(index, layer, field, fmt::format("{}", value));
}

void check_bytes(size_t index, const LayerCost& layer, const char* field, int64_t value) {
  if (value < 0) reject(index, layer, field, std::to_string(value));
}

}  // namespace

void validate_layer_costs(const std::vector<LayerCost>& layers) {
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerCost& layer = layers[i];
    check_ms(i, layer, "forward_ms", layer.forward_ms);
    check_ms(i, layer, "backward_ms", layer.backward_ms);
    check_bytes(i, layer, "param_bytes", layer.param_bytes);
    check_bytes(i, layer, "activation_bytes", layer.activation_bytes);
    check_bytes(i, layer, "output_bytes", layer.output_bytes);
  }
}

}  // namespace pipebal::balance
