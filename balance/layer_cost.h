// What the balancer knows about a model: one LayerCost per layer, measured per micro-batch (the
// profiler runs at the micro-batch size). Nothing else about the model is needed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pipebal::balance {

struct LayerCost {
  std::string name;
  std::string type;
  double forward_ms = 0;         // one micro-batch's forward on a speed-1 device
  double backward_ms = 0;        // its backward (without recomputation)
  int64_t param_bytes = 0;       // parameters (a profile's buffer_bytes are not counted)
  int64_t activation_bytes = 0;  // what autograd saves for backward, per micro-batch
  int64_t output_bytes = 0;      // the layer's output, sent to the next stage when cut here
};

// A profile: the model's layers in execution order, and the batch size they were measured at.
struct CostProfile {
  std::string model;
  int64_t batch_size = 0;  // 0 when the document does not say
  std::vector<LayerCost> layers;
};

// Throws std::invalid_argument naming the first layer (index and name) and field that is NaN,
// infinite or negative.
void validate_layer_costs(const std::vector<LayerCost>& layers);

}  // namespace pipebal::balance
