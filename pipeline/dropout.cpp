// See dropout.h.
#include "pipeline/dropout.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

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
  return stage_dropout(input, p_, is_training());
}

at::Tensor stage_dropout(const at::Tensor& input, double p, bool train, bool feature) {
  if (!train || p == 0) return input;
  at::Generator* generator = stage_generator();
  if (generator == nullptr || !input.device().is_cpu() || (feature && input.dim() < 2)) {
    return feature ? torch::feature_dropout(input, p, true) : torch::dropout(input, p, true);
  }
  if (p >= 1) return input * 0;
  at::Tensor keep = at::empty_like(input);
  if (feature) {  // one draw per sample and channel
    std::vector<int64_t> shape = input.sizes().vec();
    std::fill(shape.begin() + 2, shape.end(), 1);
    keep = at::empty(shape, input.options());
  }
  // The mask scaled in place, then one product: a pass and a temporary fewer than
  // input * keep / (1 - p), on what is a memory-bound operation.
  keep.bernoulli_(1 - p, *generator).div_(1 - p);
  return input * keep;
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
