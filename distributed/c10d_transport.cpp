// See c10d_transport.h.
#include "pipebal/distributed/c10d_transport.h"

#include <unistd.h>

#include <cstdlib>
#include <set>

#include <fmt/format.h>
#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "pipebal/common/env_flag.h"
#include "pipebal/distributed/channel_ends.h"
#include "pipebal/distributed/gloo_channel.h"
#include "pipebal/distributed/nccl_link.h"
#include "pipebal/distributed/shared_memory_channel.h"
#include "pipebal/distributed/tensor_channel.h"

namespace pipebal::distributed {
namespace {

bool tensor_channel_asked() {
  return env_flag(kTensorChannelVariable);
}

std::string host_name() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

// Whether NCCL can carry this rank's messages to `peer`: both stages on GPUs, not the same one.
// Each rank publishes "device@host" and reads the peer's.
bool nccl_between(Group& group, int peer, const c10::Device& device) {
  const std::string mine = fmt::format("{}@{}", device.str(), host_name());
  group.publish(fmt::format("device/{}", group.rank()), mine);
  const std::string theirs = group.await(fmt::format("device/{}", peer));
  return device.is_cuda() && theirs.rfind("cuda", 0) == 0 && theirs != mine;
}

class C10dTransport : public pipeline::Transport {
 public:
  C10dTransport(std::shared_ptr<Group> group, Placement placement, c10::Device device)
      : group_(std::move(group)),
        placement_(placement),
        replica_(placement.replica_of(group_->rank())),
        device_(device) {
    // The ranks this one may exchange messages with: its neighbours on the ring of the
    // pipeline's devices (the interleaved schedule's last device sends to the first), settled
    // in increasing order as Group::shares_memory_with asks.
    const int position = placement_.device_of(group_->rank());
    std::set<int> peers;
    for (int step : {-1, 1}) {
      const int neighbour = (position + step + placement_.devices) % placement_.devices;
      if (neighbour != position) peers.insert(placement_.rank_of(neighbour, replica_));
    }
    for (int peer : peers) way_to(*group_, peer, device_);
  }

  bool runs_stage(int stage, int stages) const override {
    if (stages % placement_.devices != 0) {
      throw std::invalid_argument(
          fmt::format("a pipeline of {} stages on a run placed for {} processes per pipeline",
                      stages, placement_.devices));
    }
    return placement_.runs(stage, group_->rank());
  }

  std::unique_ptr<pipeline::Channel> connect(int from, int to) override {
    const int from_rank = placement_.rank_of(placement_.device_of_stage(from), replica_);
    const int to_rank = placement_.rank_of(placement_.device_of_stage(to), replica_);
    return c10d_channel(group_, from, to, from_rank, to_rank, device_);
  }

  // The mean over the replicas of their last stages' losses (each replica's losses weigh its
  // share of the batch), on every rank.
  void share_losses(std::vector<double>& losses, int last_stage) override {
    at::Tensor all = at::tensor(losses, at::kDouble) / placement_.replicas;
    if (!placement_.runs(last_stage, group_->rank())) all.zero_();
    std::vector<at::Tensor> message{all};
    auto work = group_->process_group().allreduce(message);
    group_->wait_collective(*work, "sharing the step's losses");
    for (size_t i = 0; i < losses.size(); ++i)
      losses[i] = all[static_cast<int64_t>(i)].item<double>();
  }

  void report_failure(const std::string& what) noexcept override { group_->report_failure(what); }
  bool remote() const override { return true; }
  double clock_offset_ms() const override { return group_->clock_offset_ms(); }

 private:
  std::shared_ptr<Group> group_;
  Placement placement_;
  int replica_;
  c10::Device device_;
};

}  // namespace

Way way_to(Group& group, int peer, const c10::Device& device) {
  const bool tensors = tensor_channel_asked();
  if (tensors && nccl_available() && nccl_between(group, peer, device)) return Way::kNccl;
  if (group.shares_memory_with(peer)) return Way::kSharedMemory;
  return tensors ? Way::kGlooTensors : Way::kGloo;
}

std::string describe_way(Way way, int peer) {
  switch (way) {
    case Way::kNccl:
      return "through NCCL";
    case Way::kSharedMemory:
      return fmt::format("in memory shared with rank {}", peer);
    case Way::kGlooTensors:
      return "tensor by tensor through Gloo";
    case Way::kGloo:
      break;
  }
  return "through Gloo";
}

std::shared_ptr<pipeline::Transport> c10d_transport(std::shared_ptr<Group> group,
                                                    Placement placement, c10::Device device) {
  return std::make_shared<C10dTransport>(std::move(group), placement, device);
}

std::unique_ptr<pipeline::Channel> c10d_channel(std::shared_ptr<Group> group, int from, int to,
                                                int from_rank, int to_rank,
                                                const c10::Device& device) {
  const ChannelEnds ends{from, to, from_rank, to_rank};
  const int peer = from_rank == group->rank() ? to_rank : from_rank;
  if (peer == group->rank()) return gloo_channel(std::move(group), ends);
  switch (way_to(*group, peer, device)) {
    case Way::kNccl:
      return tensor_channel(group, ends, nccl_link(*group, ends, device));
    case Way::kSharedMemory:
      return shared_memory_channel(std::move(group), ends);
    case Way::kGlooTensors:
      return tensor_channel(group, ends, gloo_link(*group, ends));
    case Way::kGloo:
      break;
  }
  return gloo_channel(std::move(group), ends);
}

}  // namespace pipebal::distributed
