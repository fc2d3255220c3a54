// The engine's channel between two ranks on one host that share memory (Group::
// shares_memory_with): each message is written into a slot of the sender's shared memory
// (shared_slots.h) and its notice put into the receiver's mailbox (shared_mailbox.h), so that
// no message, and no word about one, passes through a socket or another thread. The receiver
// creates the mailbox and publishes its address in the store; the sender opens it at its first
// message.
#pragma once

#include <memory>

#include "distributed/group.h"
#include "pipeline/transport.h"

namespace pipebal::distributed {

// From stage `from` on rank `from_rank` to stage `to` on `to_rank`, this process at one end.
std::unique_ptr<pipeline::Channel> shared_memory_channel(std::shared_ptr<Group> group, int from,
                                                         int to, int from_rank, int to_rank);

}  // namespace pipebal::distributed
