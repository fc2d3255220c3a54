// The engine's channel between two ranks on one host that share memory (Group::
// shares_memory_with): each message is written into a slot of the sender's shared memory
// (shared_slots.h) and its notice put into the receiver's mailbox (shared_mailbox.h), so that
// no message, and no word about one, passes through a socket or another thread. The receiver
// creates the mailbox and publishes its address in the store; the sender opens it at its first
// message.
#pragma once

#include <memory>

#include "pipebal/distributed/channel_ends.h"
#include "pipebal/distributed/group.h"
#include "pipebal/pipeline/transport.h"

namespace pipebal::distributed {

// Between `ends`, this process at one of them.
std::unique_ptr<pipeline::Channel> shared_memory_channel(std::shared_ptr<Group> group,
                                                         const ChannelEnds& ends);

}  // namespace pipebal::distributed
