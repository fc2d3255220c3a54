// The two ends of one of the engine's channels across processes: stage `from_stage` on rank
// `from_rank` sends to its neighbour `to_stage` on `to_rank`, and what a channel's errors say
// about them, whichever way its messages go (c10d_transport.cpp, shared_memory_channel.h).
// Torch-free.
#pragma once

#include <string>

#include <fmt/format.h>

namespace pipebal::distributed {

struct ChannelEnds {
  int from_stage = 0;
  int to_stage = 0;
  int from_rank = 0;
  int to_rank = 0;

  const char* carries() const { return to_stage > from_stage ? "activations" : "gradients"; }
  std::string waiting_for(int micro_batch) const {
    return fmt::format("waiting for rank {}'s {} of micro-batch {} (stage {} to {})", from_rank,
                       carries(), micro_batch, from_stage, to_stage);
  }
  std::string sending(int micro_batch) const {
    return fmt::format("sending rank {} the {} of micro-batch {} (stage {} to {})", to_rank,
                       carries(), micro_batch, from_stage, to_stage);
  }
};

}  // namespace pipebal::distributed
