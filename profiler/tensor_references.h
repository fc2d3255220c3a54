// Who refers to a block of tensor memory: whether a batch's tensors are the only holders of the
// block they view, and what a copy of those views would take. The memory accounting asks this of
// a message a stage takes (taken_batch.h) and of a layer's output after its B (profiler.h).
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace pipebal::profiler {

// Whether nothing but `uses` (tensors viewing one block, held by one batch) refers to the block:
// each tensor object is referred to only by the batch and by the views made of it (a view keeps
// its base, which may be a tensor outside the batch that only views keep), and every reference to
// the block is one of those tensor objects. `uses` is not empty.
bool only_these_refer_to_their_block(const std::vector<const at::Tensor*>& uses);

// What a copy of the views would take: each tensor object's bytes once, at most the block's.
int64_t viewed_bytes(const std::vector<const at::Tensor*>& uses);

}  // namespace pipebal::profiler
