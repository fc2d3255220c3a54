// Multi-layer perceptron: `layers` blocks of Linear(width, width) + ReLU and a linear head.
#pragma once

#include <cstdint>

#include "pipebal/pipeline/layer_seq.h"

namespace pipebal::models {

struct MlpOptions {
  int64_t layers = 16;
  int64_t width = 512;
  int64_t classes = 10;
};

// Input [N, width]; output [N, classes]. Layers `fc0` .. `fc{layers-1}`, then `head`.
pipeline::LayerSeq make_mlp(const MlpOptions& options);

}  // namespace pipebal::models
