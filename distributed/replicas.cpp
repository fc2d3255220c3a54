// See replicas.h.
#include "distributed/replicas.h"

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
  // Buckets of gradients of one dtype, flattened into one tensor each: few large messages.
  std::vector<at::Tensor> bucket;
  int64_t bytes = 0;
  auto flush = [&] {
    if (bucket.empty()) return;
    std::vector<at::Tensor> flat;
    for (const auto& g : bucket) flat.push_back(g.reshape({-1}).to(at::kCPU));
    std::vector<at::Tensor> message{at::cat(flat)};
    auto work = stage_group_->allreduce(message);
    group_->wait(*work, "averaging the gradients over the replicas");
    message[0].div_(placement_.replicas);
    int64_t offset = 0;
    for (auto& g : bucket) {
      g.copy_(message[0].narrow(0, offset, g.numel()).view(g.sizes()));
      offset += g.numel();
    }
    bucket.clear();
    bytes = 0;
  };
  for (const auto& p : parameters) {
    at::Tensor grad = p.grad();
    if (!grad.defined()) continue;
    if (!bucket.empty() && bucket.front().scalar_type() != grad.scalar_type()) flush();
    bucket.push_back(grad);
    bytes += grad.numel() * static_cast<int64_t>(grad.element_size());
    if (bytes >= bucket_bytes_) flush();
  }
  flush();
}

double GradientAverager::mean(double value) {
  if (!stage_group_) return value;
  std::vector<at::Tensor> message{torch::tensor({value}, torch::kDouble)};
  auto work = stage_group_->allreduce(message);
  group_->wait(*work, "averaging the loss over the replicas");
  return message[0].item<double>() / placement_.replicas;
}

}  // namespace pipebal::distributed
