// See module_layer.h.
#include "pipeline/module_layer.h"

#include <torch/nn/module.h>

namespace pipebal::pipeline {

void ChainImpl::reset() {
  body_ =
      register_module("body", std::dynamic_pointer_cast<torch::nn::SequentialImpl>(body_->clone()));
}

int64_t Layer::parameter_count() const {
  int64_t count = 0;
  for (const auto& p : parameters()) count += p.numel();
  return count;
}

ModuleLayer::ModuleLayer(std::string name, std::string type, torch::nn::AnyModule module,
                         LayerIO io)
    : Layer(std::move(name), std::move(type)), module_(std::move(module)), io_(io) {}

Batch ModuleLayer::forward(Batch input) {
  if (io_ == LayerIO::kBatch) return module_.forward<Batch>(std::move(input));
  input.value() = module_.forward<at::Tensor>(input.value());
  return input;
}

std::vector<at::Tensor> ModuleLayer::parameters() const {
  return module().parameters();
}

std::vector<at::Tensor> ModuleLayer::buffers() const {
  return module().buffers();
}

void ModuleLayer::to(const c10::Device& device) {
  module().to(device);
}

void ModuleLayer::to(c10::ScalarType dtype) {
  module().to(dtype);
}

void ModuleLayer::train(bool on) {
  module().train(on);
}

bool ModuleLayer::is_training() const {
  return module().is_training();
}

bool ModuleLayer::is_stochastic() const {
  if (!module().is_training()) return false;
  for (const auto& m : module().modules()) {
    if (m->name().find("Dropout") != std::string::npos) return true;
  }
  return false;
}

std::unique_ptr<Layer> ModuleLayer::clone() const {
  auto copy = std::make_unique<ModuleLayer>(name(), type(), module_.clone(), io_);
  copy->set_skips(stashes(), pops());
  return copy;
}

}  // namespace pipebal::pipeline
