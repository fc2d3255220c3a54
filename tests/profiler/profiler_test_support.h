// What the profiler's tests share: quick options, a first layer that makes the next one's input
// require grad, the size of a float32.
#pragma once

#include <cstdint>

#include <torch/torch.h>

#include "pipebal/pipeline/layer_seq.h"
#include "pipebal/pipeline/module_layer.h"
#include "pipebal/profiler/profiler.h"

namespace pipebal::profiler::testing {

inline constexpr int64_t kFloat = 4;

inline ProfileOptions quick() {
  ProfileOptions options;
  options.warmup = 1;
  options.repeat = 3;
  return options;
}

// A cheap first layer, so that the layers under test get an input that requires grad (layer
// 0's input does not, as in a pipeline's first stage).
inline void add_identity(pipeline::LayerSeq& seq) {
  seq.add(pipeline::make_layer("id", "Identity", torch::nn::Identity()));
}

}  // namespace pipebal::profiler::testing
