// See mlp.h.
#include "pipebal/models/mlp.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include "pipebal/pipeline/module_layer.h"

namespace pipebal::models {

pipeline::LayerSeq make_mlp(const MlpOptions& options) {
  pipeline::LayerSeq seq;
  for (int64_t i = 0; i < options.layers; ++i) {
    seq.add(pipeline::make_layer(
        "fc" + std::to_string(i), "LinearReLU",
        torch::nn::Sequential(torch::nn::Linear(options.width, options.width), torch::nn::ReLU())));
  }
  seq.add(
      pipeline::make_layer("head", "Linear", torch::nn::Linear(options.width, options.classes)));
  return seq;
}

}  // namespace pipebal::models
