// See replicas.h.
#include "pipebal/distributed/replicas.h"

#include <fmt/format.h>
#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

namespace pipebal::distributed {

GradientAverager::GradientAverager(std::shared_ptr<Group> group, Placement placement,
                                   int64_t bucket_bytes)
    : group_(std::move(group)), placement_(placement), bucket_bytes_(bucket_bytes) {
  if (placement_.replicas < 2) return;
  const int device = placement_.device_of(group_->rank());
  std::vector<int> members;
  for (int r = 0; r < placement_.replicas; ++r) members.push_back(placement_.rank_of(device, r));
  stage_group_ = group_->subgroup(fmt::format("stage{}", device), members);
}

GradientAverager::~GradientAverager() = default;

void GradientAverager::average(const std::vector<at::Tensor>& parameters) {
  if (!stage_group_) return;
  torch::NoGradGuard no_grad;
  // Buckets of parameters of one dtype, their gradients flattened into one tensor each: few large
  // messages. Every replica sends every trainable parameter, in the same layout whatever its
  // micro-batches used: a gradient it has none of (a branch its data did not take) counts as
  // zeros, and a flag per parameter, summed with them, says whether any replica had one. None
  // had: the gradient stays undefined, as on one pipeline over the whole mini-batch.
  std::vector<at::Tensor> bucket;
  int64_t bytes = 0;
  auto flush = [&] {
    if (bucket.empty()) return;
    const auto dtype = bucket.front().scalar_type();
    const auto cpu = at::TensorOptions().dtype(dtype).device(at::kCPU);
    std::vector<at::Tensor> flat;
    std::vector<double> had;
    for (const auto& p : bucket) {
      const at::Tensor& g = p.grad();
      flat.push_back(g.defined() ? g.reshape({-1}).to(at::kCPU) : at::zeros({p.numel()}, cpu));
      had.push_back(g.defined() ? 1.0 : 0.0);
    }
    flat.push_back(torch::tensor(had, torch::kDouble).to(dtype));
    std::vector<at::Tensor> message{at::cat(flat)};
    auto work = stage_group_->allreduce(message);
    group_->wait_collective(*work, "averaging the gradients over the replicas");
    const at::Tensor means = message[0].div_(placement_.replicas);  // a flag > 0: one had it
    const int64_t count = static_cast<int64_t>(bucket.size());
    const at::Tensor had_any =
        means.narrow(0, means.numel() - count, count).to(at::kDouble).contiguous();
    int64_t offset = 0;
    for (size_t i = 0; i < bucket.size(); ++i) {
      at::Tensor& p = bucket[i];
      const at::Tensor mean = means.narrow(0, offset, p.numel()).view(p.sizes());
      offset += p.numel();
      if (had_any.data_ptr<double>()[i] == 0) continue;  // none had one
      if (p.grad().defined()) {
        p.mutable_grad().copy_(mean);
      } else {
        p.mutable_grad() =
            mean.to(p.device(), /*non_blocking=*/false, /*copy=*/true);  // not a view
      }
    }
    bucket.clear();
    bytes = 0;
  };
  for (const auto& p : parameters) {
    if (!p.requires_grad()) continue;  // frozen on every replica alike
    if (!bucket.empty() && bucket.front().scalar_type() != p.scalar_type()) flush();
    bucket.push_back(p);
    bytes += p.numel() * static_cast<int64_t>(p.element_size());
    if (bytes >= bucket_bytes_) flush();
  }
  flush();
}

void GradientAverager::sum(at::Tensor& values) {
  if (!stage_group_) return;
  std::vector<at::Tensor> message{values.contiguous()};
  auto work = stage_group_->allreduce(message);
  group_->wait_collective(*work, "summing the batch-norm statistics over the replicas");
  values = message[0];
}

double GradientAverager::mean(double value) {
  if (!stage_group_) return value;
  std::vector<at::Tensor> message{torch::tensor({value}, torch::kDouble)};
  auto work = stage_group_->allreduce(message);
  group_->wait_collective(*work, "averaging the loss over the replicas");
  return message[0].item<double>() / placement_.replicas;
}

}  // namespace pipebal::distributed
