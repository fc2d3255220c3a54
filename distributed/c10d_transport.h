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

#include "distributed/group.h"
#include "distributed/placement.h"
#include "pipeline/transport.h"

namespace pipebal::distributed {

// Each rank runs the stage `placement` gives it.
std::shared_ptr<pipeline::Transport> c10d_transport(std::shared_ptr<Group> group,
                                                    Placement placement);

// One channel of such a transport: from stage `from` on rank `from_rank` to stage `to` on
// `to_rank`, this process at one end; through shared memory where Group::shares_memory_with
// says so (which this call may settle).
std::unique_ptr<pipeline::Channel> c10d_channel(std::shared_ptr<Group> group, int from, int to,
                                                int from_rank, int to_rank);

}  // namespace pipebal::distributed
