// A channel across processes whose tensors travel one by one, as they are, over a link of their
// own between the two ranks: NCCL between two GPUs (nccl_link.h, with a CUDA LibTorch), else a
// Gloo group of the two, through host memory. Ahead of the tensors a small message through the
// run's Gloo group (gloo_channel.h) describes the batch (dtypes, shapes, skip names:
// wire_message.h), so that the receiver can make room for them, and numbers it: a link matches
// tensors in the order they were sent (NCCL has no tags), so the receiver checks that it takes
// the messages in that order and refuses, naming the channel, to take one out of turn.
//
// Chosen by c10d_transport.h when PIPEBAL_TENSOR_CHANNEL=1 (see there).
#pragma once

#include <memory>
#include <optional>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include "pipebal/distributed/channel_ends.h"
#include "pipebal/distributed/group.h"
#include "pipebal/pipeline/transport.h"

namespace pipebal::distributed {

// Point-to-point between the two ranks of one channel, for tensors of one device.
class TensorLink {
 public:
  virtual ~TensorLink() = default;
  // Where the tensors it carries live: the receiver makes room for them there.
  virtual c10::Device device() const = 0;
  // A tensor (contiguous, on device()) to the other rank, and one from it into `into`; each
  // taken in the order the other side sent. A device link orders a send after the work queued
  // on the current stream, and Group::wait on a receive makes the current stream wait for it.
  virtual c10::intrusive_ptr<c10d::Work> send(at::Tensor& tensor) = 0;
  virtual c10::intrusive_ptr<c10d::Work> receive(at::Tensor& into) = 0;
  // The stream on which received tensors are ready once their receives were waited for: the
  // current one of a device link's device, none on the CPU.
  virtual std::optional<c10::Stream> ready_on() const = 0;
};

// A Gloo group of the channel's two ranks, for CPU tensors. Both ends make it, in the same order
// among the channels between them.
std::unique_ptr<TensorLink> gloo_link(Group& group, const ChannelEnds& ends);

std::unique_ptr<pipeline::Channel> tensor_channel(std::shared_ptr<Group> group,
                                                  const ChannelEnds& ends,
                                                  std::unique_ptr<TensorLink> link);

}  // namespace pipebal::distributed
