// The engine's transport across processes: each rank runs one stage of one pipeline replica
// (placement.h), and neighbouring stages of a replica exchange activations and gradients as
// c10d point-to-point messages over the run's Gloo group (group.h). A message carries its own
// description (how many tensors, their dtypes and shapes, the names of the skip tensors), so a
// receiver needs to know nothing in advance (wire_message.h); receivers post their receives
// ahead, so that a message leaves in one send as soon as it is posted. Tensors on an accelerator
// travel through host memory (Gloo's point-to-point messages are host-only).
#pragma once

#include <memory>

#include "distributed/group.h"
#include "distributed/placement.h"
#include "pipeline/transport.h"

namespace pipebal::distributed {

// Each rank runs the stage `placement` gives it.
std::shared_ptr<pipeline::Transport> c10d_transport(std::shared_ptr<Group> group,
                                                    Placement placement);

}  // namespace pipebal::distributed
