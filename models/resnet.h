// ResNet (He et al.) flattened into a layer sequence: stem, one layer per residual block, head.
#pragma once

#include <cstdint>

#include "pipebal/pipeline/layer_seq.h"

namespace pipebal::models {

struct ResNetOptions {
  int64_t depth = 50;  // 18, 34 (basic blocks), 50, 101, 152 (bottleneck blocks)
  int64_t width = 64;  // channels of the first group; doubled in every later group
  int64_t classes = 10;
};

// Input [N, 3, H, W]; output [N, classes]. Layers `stem`, `g{group}b{block}`..., `head`.
// Throws std::invalid_argument for an unsupported depth.
pipeline::LayerSeq make_resnet(const ResNetOptions& options);

}  // namespace pipebal::models
