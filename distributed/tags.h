// Gloo message tags of a run: each point-to-point message between two ranks is matched by
// (sender, tag), in order within a tag.
#pragma once

#include "pipebal/pipeline/schedule.h"

namespace pipebal::distributed {

constexpr int kClockTag = 1;  // clock synchronisation with rank 0 (group.cpp)
constexpr int kLinkTag = 2;   // link measurements
constexpr int kDataTagBase = 16;
// Channels a pipeline may have: forward and backward between each pair of neighbouring stages
// (pipeline::kMaxStages = 512).
constexpr int kMaxChannels = 1024;
// After the steps, rank 0 gathers the weights (+ tensor index): above every data tag
// (kDataTagBase + kMaxChunks x kMaxChannels < 2^27).
constexpr int kWeightsTagBase = 1 << 28;
static_assert(kDataTagBase + int64_t{pipeline::kMaxChunks} * kMaxChannels < kWeightsTagBase,
              "data tags stay below the weights' tags");

// A stage's activations (from < to) or gradients (from > to) of a micro-batch. With several
// stages per process (interleaved), two ranks share several channels: each has its own tags.
constexpr int data_tag(int micro_batch, int from_stage, int to_stage) {
  const int channel = 2 * (from_stage < to_stage ? from_stage : to_stage) + (from_stage > to_stage);
  return kDataTagBase + micro_batch * kMaxChannels + channel;
}

}  // namespace pipebal::distributed
