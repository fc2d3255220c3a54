// Small hand-made profiles for the cost model's tests.
#pragma once

#include <string>
#include <vector>

#include "pipebal/balance/cost_model.h"

namespace pipebal::balance {

// Three layers: forward 1, 2 and 3 ms, backward 2 ms each, 100 parameter and 10 activation
// bytes each, outputs of 1000, 2000 and 3000 bytes.
inline std::vector<LayerCost> three_layers() {
  std::vector<LayerCost> layers(3);
  const double forward[] = {1, 2, 3};
  for (int i = 0; i < 3; ++i) {
    layers[i].name = "l" + std::to_string(i);
    layers[i].forward_ms = forward[i];
    layers[i].backward_ms = 2;
    layers[i].param_bytes = 100;
    layers[i].activation_bytes = 10;
    layers[i].output_bytes = 1000 * (i + 1);
  }
  return layers;
}

inline CostOptions options_with(pipeline::ScheduleKind kind, pipeline::CheckpointMode mode,
                                int chunks) {
  CostOptions options;
  options.schedule = kind;
  options.checkpoint = mode;
  options.chunks = chunks;
  return options;
}

}  // namespace pipebal::balance
