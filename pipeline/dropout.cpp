// See dropout.h.
#include "pipeline/dropout.h"

#include <stdexcept>
#include <string>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

namespace pipebal::pipeline {
namespace {

thread_local at::Generator* current_generator = nullptr;

}  // namespace

DropoutImpl::DropoutImpl(double p) : p_(p) {
  if (p < 0 || p >= 1) {
    throw std::invalid_argument("dropout probability must be in [0, 1), got " + std::to_string(p));
  }
}

at::Tensor DropoutImpl::forward(const at::Tensor& input) {
  if (!is_training() || p_ == 0) return input;
  at::Generator* generator = stage_generator();
  if (generator == nullptr || !input.device().is_cpu()) return torch::dropout(input, p_, true);
  const at::Tensor keep = at::empty_like(input).bernoulli_(1 - p_, *generator);
  return input * keep / (1 - p_);
}

at::Generator* stage_generator() {
  return current_generator;
}

StageGeneratorScope::StageGeneratorScope(uint64_t seed)
    : generator_(at::make_generator<at::CPUGeneratorImpl>(seed)), previous_(current_generator) {
  current_generator = &generator_;
}

StageGeneratorScope::~StageGeneratorScope() {
  current_generator = previous_;
}

}  // namespace pipebal::pipeline
