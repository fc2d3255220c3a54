// See pass_timer.h.
#include "pipebal/profiler/pass_timer.h"

#include <algorithm>
#include <utility>

#include <ATen/ATen.h>

#include "pipebal/pipeline/handed_backward.h"
#include "pipebal/pipeline/split_backward.h"

namespace pipebal::profiler {

using pipeline::Batch;

Batch as_leaves(const Batch& batch, bool requires_grad) {
  auto leaf = [&](const at::Tensor& t) {
    if (!t.defined()) return t;
    at::Tensor copy = t.detach();
    if (requires_grad && copy.is_floating_point()) copy.requires_grad_(true);
    return copy;
  };
  Batch leaves;
  for (const at::Tensor& t : batch.tensors) leaves.tensors.push_back(leaf(t));
  for (const auto& [name, t] : batch.skips) leaves.skips.emplace(name, leaf(t));
  return leaves;
}

PassTimer::~PassTimer() {
  for (auto& p : layers_.parameters()) {
    if (p.grad().defined()) p.mutable_grad() = at::Tensor();
  }
}

void PassTimer::run(LayerTimer* timer, std::vector<LayerProfile>* profiles, bool split) {
  const size_t n = layers_.size();
  std::vector<Batch> inputs(n), outputs(n);
  Batch current = sample_;
  for (size_t i = 0; i < n; ++i) {
    inputs[i] = as_leaves(current, /*requires_grad=*/i > 0);
    LayerTimer* forward_timer = split ? nullptr : timer;  // a split pass times W alone
    if (forward_timer != nullptr) forward_timer->start();
    outputs[i] = pipeline::forward_keeping_input(layers_[i], inputs[i], input_writes_[i]);
    if (forward_timer != nullptr) {
      (*profiles)[i].forward_samples_ms.push_back(forward_timer->stop_ms());
    }
    current = outputs[i];
  }
  for (size_t k = n; k-- > 0;) {
    if (k + 1 == n && loss_) {
      // As on the last stage: the loss of the output, then autograd from it.
      if (split) {
        // B includes the loss, as backward_ms does.
        if (timer != nullptr) timer->start();
        const at::Tensor loss = loss_(outputs[k].value());
        if (loss.requires_grad()) {
          split_backward(k, {loss}, {at::ones_like(loss)}, inputs, timer, profiles);
        } else if (timer != nullptr) {
          timer->stop_ms();
        }
        continue;
      }
      if (timer != nullptr) timer->start();
      const at::Tensor loss = loss_(outputs[k].value());
      // As a stage runs its backward (at autograd's stack alignment, pipeline/handed_backward.h).
      const bool ran = loss.requires_grad();
      if (ran) pipeline::handed_backward({loss}, {at::ones_like(loss)});
      if (timer != nullptr) {
        (*profiles)[k].backward_samples_ms.push_back(less_run(timer->stop_ms(), ran));
      }
      continue;
    }
    std::vector<at::Tensor> outs, grads;
    auto add = [&](const at::Tensor& out, const at::Tensor& grad) {
      if (out.defined() && out.requires_grad() && grad.defined()) {
        outs.push_back(out);
        grads.push_back(grad);
      }
    };
    const Batch& out = outputs[k];
    for (size_t j = 0; j < out.tensors.size(); ++j) {
      const at::Tensor& t = out.tensors[j];
      if (k + 1 == n) {
        if (t.defined() && t.requires_grad()) add(t, at::ones_like(t));
      } else if (j < inputs[k + 1].tensors.size()) {
        add(t, inputs[k + 1].tensors[j].grad());
      }
    }
    for (const auto& [name, t] : out.skips) {
      if (k + 1 == n) continue;
      const auto it = inputs[k + 1].skips.find(name);
      if (it != inputs[k + 1].skips.end()) add(t, it->second.grad());
    }
    if (split) {
      if (timer != nullptr) timer->start();
      split_backward(k, outs, grads, inputs, timer, profiles);
      continue;
    }
    const bool ran = !outs.empty();
    if (timer != nullptr) timer->start();
    pipeline::handed_backward(std::move(outs), std::move(grads));  // as a stage runs it
    if (timer != nullptr) {
      (*profiles)[k].backward_samples_ms.push_back(less_run(timer->stop_ms(), ran));
    }
  }
  for (auto& p : layers_.parameters()) {
    if (p.grad().defined()) p.mutable_grad().zero_();
  }
}

void PassTimer::split_backward(size_t k, const std::vector<at::Tensor>& roots,
                               const std::vector<at::Tensor>& grads, std::vector<Batch>& inputs,
                               LayerTimer* timer, std::vector<LayerProfile>* profiles) {
  std::vector<at::Tensor> leaves = inputs[k].tensors;
  for (const auto& [name, t] : inputs[k].skips) leaves.push_back(t);
  pipeline::SplitBackward split(roots, grads, leaves, layers_[k].parameters());
  if (timer != nullptr) {
    (*profiles)[k].input_grad_samples_ms.push_back(less_run(timer->stop_ms(), !roots.empty()));
  }
  if (profiles != nullptr) (*profiles)[k].kept_grad_bytes = split.kept_bytes();
  if (timer != nullptr) timer->start();
  split.run_weight();
  if (timer != nullptr) (*profiles)[k].weight_samples_ms.push_back(timer->stop_ms());
  for (size_t j = 0; j < leaves.size(); ++j) {
    if (split.input_grads()[j].defined()) leaves[j].mutable_grad() = split.input_grads()[j];
  }
}

}  // namespace pipebal::profiler
