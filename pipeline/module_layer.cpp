// See module_layer.h.
#include "pipebal/pipeline/module_layer.h"

#include <optional>

#include <torch/nn/module.h>
#include <torch/nn/modules/dropout.h>

#include "pipebal/pipeline/batch_norm.h"
#include "pipebal/pipeline/dropout.h"

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

namespace {

// The drop probability of LibTorch's dropout modules; nullopt for anything else.
std::optional<double> dropout_probability(const torch::nn::Module& m) {
  namespace nn = torch::nn;
  if (const auto* d = m.as<nn::DropoutImpl>()) return d->options.p();
  if (const auto* d = m.as<nn::Dropout2dImpl>()) return d->options.p();
  if (const auto* d = m.as<nn::Dropout3dImpl>()) return d->options.p();
  if (const auto* d = m.as<nn::AlphaDropoutImpl>()) return d->options.p();
  if (const auto* d = m.as<nn::FeatureAlphaDropoutImpl>()) return d->options.p();
  return std::nullopt;
}

// Whether a module of `module`'s tree draws random numbers: a dropout that can drop (one of
// unknown kind counts as random); with `shared_only`, only those drawing from ATen's
// process-wide generator, i.e. all but pipebal's Dropout.
bool draws_random(const torch::nn::Module& module, bool shared_only) {
  if (!module.is_training()) return false;
  for (const auto& m : module.modules()) {
    if (const auto* own = m->as<DropoutImpl>()) {
      if (!shared_only && own->p_ > 0) return true;
      continue;
    }
    // RReLU draws its slopes in training from ATen's generator.
    if (m->name().find("RReLU") != std::string::npos) return true;
    if (m->name().find("Dropout") == std::string::npos) continue;
    const std::optional<double> p = dropout_probability(*m);
    if (!p || *p > 0) return true;
  }
  return false;
}

}  // namespace

bool ModuleLayer::is_stochastic() const {
  return draws_random(module(), /*shared_only=*/false);
}

bool ModuleLayer::draws_from_shared_generator() const {
  return draws_random(module(), /*shared_only=*/true);
}

bool ModuleLayer::has_other_batch_norm() const {
  for (const auto& m : module().modules()) {
    if (m->as<BatchNormImpl>() == nullptr && m->name().find("BatchNorm") != std::string::npos) {
      return true;
    }
  }
  return false;
}

std::unique_ptr<Layer> ModuleLayer::clone() const {
  auto copy = std::make_unique<ModuleLayer>(name(), type(), module_.clone(), io_);
  copy->set_skips(stashes(), pops());
  return copy;
}

}  // namespace pipebal::pipeline
