// See batch_norm.h.
#include "pipebal/pipeline/batch_norm.h"

#include <cmath>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <torch/torch.h>

#include "pipebal/pipeline/layer_batch_norms.h"
#include "pipebal/pipeline/module_layer.h"

namespace pipebal::pipeline {
namespace {
thread_local bool recomputing = false;
}  // namespace

bool is_recomputing() {
  return recomputing;
}
RecomputeScope::RecomputeScope() : previous_(recomputing) {
  recomputing = true;
}
RecomputeScope::~RecomputeScope() {
  recomputing = previous_;
}

BatchNormImpl::BatchNormImpl(int64_t features, double momentum, double eps)
    : features_(features), momentum_(momentum), eps_(eps) {
  reset();
}

void BatchNormImpl::reset() {
  weight = register_parameter("weight", torch::ones({features_}));
  bias = register_parameter("bias", torch::zeros({features_}));
  running_mean = register_buffer("running_mean", torch::zeros({features_}));
  running_var = register_buffer("running_var", torch::ones({features_}));
  num_batches_tracked = register_buffer("num_batches_tracked", torch::zeros({}, torch::kLong));
  set_deferred(false);
}

at::Tensor BatchNormImpl::forward(const at::Tensor& input) {
  if (input.dim() < 2 || input.size(1) != features_) {
    throw std::invalid_argument("BatchNorm: expected input [N, " + std::to_string(features_) +
                                ", ...], got " + c10::str(input.sizes()));
  }
  if (!is_training()) {
    return torch::batch_norm(input, weight, bias, running_mean, running_var, false, momentum_, eps_,
                             false);
  }
  if (!deferred_) {
    {
      torch::NoGradGuard no_grad;
      num_batches_tracked += 1;
    }
    return torch::batch_norm(input, weight, bias, running_mean, running_var, true, momentum_, eps_,
                             false);
  }
  if (!is_recomputing()) {
    torch::NoGradGuard no_grad;
    std::vector<int64_t> dims{0};
    for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
    const at::Tensor x = input.detach().to(torch::kDouble);
    // The first micro-batch's sums start them, on the stream of the stage that runs it.
    sum_ = sum_.defined() ? sum_ + x.sum(dims) : x.sum(dims);
    sum_squares_ = sum_squares_.defined() ? sum_squares_ + (x * x).sum(dims) : (x * x).sum(dims);
    count_ += input.numel() / features_;
  }
  // No running statistics: normalise with the micro-batch's own.
  return torch::batch_norm(input, weight, bias, {}, {}, true, momentum_, eps_, false);
}

void BatchNormImpl::set_deferred(bool on) {
  deferred_ = on;
  sum_ = at::Tensor();
  sum_squares_ = at::Tensor();
  count_ = 0;
}

void BatchNormImpl::commit() {
  if (!deferred_ || count_ == 0) return;
  torch::NoGradGuard no_grad;
  const at::Tensor mean = sum_ / double(count_);
  const at::Tensor biased_var = sum_squares_ / double(count_) - mean * mean;
  // Running variance is unbiased, as torch's BatchNorm keeps it.
  const at::Tensor var =
      count_ > 1 ? biased_var * (double(count_) / double(count_ - 1)) : biased_var;
  running_mean.mul_(1 - momentum_).add_(mean.to(running_mean.dtype()), momentum_);
  running_var.mul_(1 - momentum_).add_(var.to(running_var.dtype()), momentum_);
  num_batches_tracked += 1;
  set_deferred(true);
}

at::Tensor BatchNormImpl::pending_statistics() const {
  const auto options = running_mean.options().dtype(torch::kDouble);
  if (count_ == 0) return torch::zeros({2 * features_ + 1}, options);
  return torch::cat({sum_, sum_squares_, torch::full({1}, static_cast<double>(count_), options)});
}

void BatchNormImpl::set_pending_statistics(const at::Tensor& statistics) {
  if (statistics.numel() != 2 * features_ + 1) {
    throw std::invalid_argument(
        fmt::format("BatchNorm: {} pending statistics for {} features (expected {})",
                    statistics.numel(), features_, 2 * features_ + 1));
  }
  count_ = std::llround(statistics[2 * features_].item<double>());
  const at::Tensor values = statistics.to(running_mean.options().dtype(torch::kDouble));
  sum_ = values.narrow(0, 0, features_).clone();
  sum_squares_ = values.narrow(0, features_, features_).clone();
}

std::vector<BatchNormImpl*> batch_norms_in(const Layer& layer) {
  std::vector<BatchNormImpl*> norms;
  const auto* module_layer = dynamic_cast<const ModuleLayer*>(&layer);
  if (module_layer == nullptr) return norms;
  for (const auto& module : module_layer->module().modules()) {
    if (auto* bn = module->as<BatchNormImpl>()) norms.push_back(bn);
  }
  return norms;
}

void BatchNormImpl::restore_pending(Pending pending) {
  sum_ = std::move(pending.sum);
  sum_squares_ = std::move(pending.sum_squares);
  count_ = pending.count;
}

}  // namespace pipebal::pipeline
