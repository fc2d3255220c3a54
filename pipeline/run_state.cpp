// See run_state.h.
#include "pipebal/pipeline/run_state.h"

#include <mutex>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "pipebal/pipeline/layer_batch_norms.h"

namespace pipebal::pipeline {

BufferSnapshot::BufferSnapshot(const LayerSeq& layers, bool any) {
  if (!any) return;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < layers.size(); ++i) {
    for (const at::Tensor& b : layers[i].buffers()) {
      buffers_.push_back(b);
      values_.push_back(b.clone());
    }
    for (BatchNormImpl* bn : batch_norms_in(layers[i])) pending_.emplace_back(bn, bn->pending());
  }
}

void BufferSnapshot::restore() const {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < buffers_.size(); ++i) buffers_[i].variable_data().copy_(values_[i]);
  for (const auto& [bn, pending] : pending_) bn->restore_pending(pending);
}

at::Tensor default_generator_state() {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

RunState::RunState(const LayerSeq& layers)
    : buffers_(layers), generator_state_(default_generator_state()) {}

RunState::~RunState() {
  restore();
}

void RunState::restore() const {
  buffers_.restore();
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(generator_state_);
}

}  // namespace pipebal::pipeline
