// A channel across processes whose messages travel over the run's Gloo group, each packed into
// one byte buffer that describes itself (wire_message.h), through host memory whatever the
// stages' devices.
#pragma once

#include <memory>

#include "pipebal/distributed/channel_ends.h"
#include "pipebal/distributed/group.h"
#include "pipebal/pipeline/transport.h"

namespace pipebal::distributed {

std::unique_ptr<pipeline::Channel> gloo_channel(std::shared_ptr<Group> group,
                                                const ChannelEnds& ends);

}  // namespace pipebal::distributed
