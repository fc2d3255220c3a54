// The tensor link between two ranks whose stages run on different GPUs: a NCCL group of the two
// (ProcessGroupNCCL), built only with a CUDA LibTorch whose NCCL headers are found
// (PIPEBAL_WITH_NCCL). NCCL refuses two ranks on one GPU: c10d_transport.h chooses this link
// only between different devices (or hosts).
#pragma once

#include <memory>

#include <c10/core/Device.h>

#include "pipebal/distributed/channel_ends.h"
#include "pipebal/distributed/group.h"
#include "pipebal/distributed/tensor_channel.h"

namespace pipebal::distributed {

// Whether this build carries NCCL links.
bool nccl_available();

// The link of one channel, its tensors on `device` (this rank's GPU). Both ends make it, in the
// same order among the channels between them. Throws std::logic_error where NCCL is not built.
std::unique_ptr<TensorLink> nccl_link(Group& group, const ChannelEnds& ends,
                                      const c10::Device& device);

}  // namespace pipebal::distributed
