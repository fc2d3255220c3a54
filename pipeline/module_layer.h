// A Layer over a torch::nn module. The module either maps the batch's main tensor to a new
// one (most layers) or takes and returns the whole Batch (layers with several tensors or
// skip tensors, e.g. AmoebaNet cells and U-Net blocks).
#pragma once

#include <torch/nn/cloneable.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>

#include "pipebal/pipeline/layer.h"

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
  void to(c10::ScalarType dtype) override;
  void train(bool on) override;
  bool is_training() const override;
  bool is_stochastic() const override;
  bool draws_from_shared_generator() const override;
  bool has_other_batch_norm() const override;
  std::unique_ptr<Layer> clone() const override;

  torch::nn::Module& module() const { return *module_.ptr(); }

 private:
  torch::nn::AnyModule module_;
  LayerIO io_;
};

// nn::Sequential's forward is a template, which AnyModule cannot hold; a Chain wraps it
// behind a plain Tensor -> Tensor forward.
struct ChainImpl : torch::nn::Cloneable<ChainImpl> {
  explicit ChainImpl(torch::nn::Sequential body) : body_(std::move(body)) { reset(); }
  // Registers a deep copy of the body, so that a clone never shares it with the original.
  void reset() override;
  at::Tensor forward(const at::Tensor& input) { return body_->forward(input); }

  torch::nn::Sequential body_;
};
TORCH_MODULE(Chain);

// Wraps a module holder (torch::nn::Linear, a TORCH_MODULE of ours, ...) as a layer.
template <typename ModuleHolder>
std::unique_ptr<Layer> make_layer(std::string name, std::string type, ModuleHolder module,
                                  LayerIO io = LayerIO::kTensor) {
  return std::make_unique<ModuleLayer>(std::move(name), std::move(type),
                                       torch::nn::AnyModule(std::move(module)), io);
}

inline std::unique_ptr<Layer> make_layer(std::string name, std::string type,
                                         torch::nn::Sequential body) {
  return make_layer(std::move(name), std::move(type), Chain(std::move(body)));
}

}  // namespace pipebal::pipeline
