// Gloo message tags of a run: each point-to-point message between two ranks is matched by
// (sender, tag), in order within a tag.
#pragma once

namespace pipebal::distributed {

constexpr int kClockTag = 1;      // clock synchronisation with rank 0 (group.cpp)
constexpr int kLinkTag = 2;       // link measurements
constexpr int kDataTagBase = 16;  // + micro-batch: a stage's activations or gradients

}  // namespace pipebal::distributed
