// The engine's transport across processes: each rank runs one stage of one pipeline replica
// (placement.h), and neighbouring stages of a replica exchange activations and gradients as
// c10d point-to-point messages over the run's Gloo group (group.h). A message carries its own
// description (how many tensors, their dtypes and shapes, the names of the skip tensors), so a
// receiver needs to know nothing in advance (wire_message.h); receivers post their receives
// ahead, so that a message leaves in one send as soon as it is posted. Between ranks on one host
// that share memory, messages go through it instead, Gloo untouched
// (shared_memory_channel.h); PIPEBAL_SHM_DISABLE=1 sends every message through Gloo. Tensors on
// an accelerator travel through host memory (Gloo's point-to-point messages are host-only).
#pragma once

#include <memory>
#include <string>

#include <c10/core/Device.h>

#include "pipebal/distributed/group.h"
#include "pipebal/distributed/placement.h"
#include "pipebal/pipeline/transport.h"

namespace pipebal::distributed {

enum class Way { kNccl, kSharedMemory, kGlooTensors, kGloo };

// How this rank's messages to and from `peer` travel, its stages on `device`. The first call for
// a peer may settle it with the peer (Group::shares_memory_with, and with
// PIPEBAL_TENSOR_CHANNEL=1 an exchange of devices through the store), so both must make it.
Way way_to(Group& group, int peer, const c10::Device& device);

// What a rank says of its messages to `peer`: "through NCCL", "in memory shared with rank 1", ...
std::string describe_way(Way way, int peer);

// Each rank runs the stage `placement` gives it, on `device`.
std::shared_ptr<pipeline::Transport> c10d_transport(std::shared_ptr<Group> group,
                                                    Placement placement,
                                                    c10::Device device = c10::kCPU);

// One channel of such a transport: from stage `from` on rank `from_rank` to stage `to` on
// `to_rank`, this process at one end, its stage on `device`; the way way_to() says.
std::unique_ptr<pipeline::Channel> c10d_channel(std::shared_ptr<Group> group, int from, int to,
                                                int from_rank, int to_rank,
                                                const c10::Device& device = c10::kCPU);

}  // namespace pipebal::distributed
