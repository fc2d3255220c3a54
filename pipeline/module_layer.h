// A Layer over a torch::nn module. The module either maps the batch's main tensor to a new
// one (most layers) or takes and returns the whole Batch (layers with several tensors or
// skip tensors, e.g. AmoebaNet cells and U-Net blocks).
#pragma once

#include <torch/nn/modules/container/any.h>

#include "pipeline/layer.h"

namespace pipebal::pipeline {

enum class LayerIO {
  kTensor,  // module.forward(Tensor) -> Tensor, applied to batch.value()
  kBatch,   // module.forward(Batch) -> Batch
};

class ModuleLayer : public Layer {
 public:
  // `module` must be cloneable (every torch::nn module and any torch::nn::Cloneable<T>).
  ModuleLayer(std::string name, std::string type, torch::nn::AnyModule module,
              LayerIO io = LayerIO::kTensor);

  Batch forward(Batch input) override;
  std::vector<at::Tensor> parameters() const override;
  std::vector<at::Tensor> buffers() const override;
  void to(const c10::Device& device) override;
  void train(bool on) override;
  bool is_training() const override;
  std::unique_ptr<Layer> clone() const override;

  torch::nn::Module& module() const { return *module_.ptr(); }

 private:
  torch::nn::AnyModule module_;
  LayerIO io_;
};

// Wraps a module holder (torch::nn::Linear, a TORCH_MODULE of ours, ...) as a layer.
template <typename ModuleHolder>
std::unique_ptr<Layer> make_layer(std::string name, std::string type, ModuleHolder module,
                                  LayerIO io = LayerIO::kTensor) {
  return std::make_unique<ModuleLayer>(std::move(name), std::move(type),
                                       torch::nn::AnyModule(std::move(module)), io);
}

}  // namespace pipebal::pipeline
