// Layers that write their input in place (a first `nn.LeakyReLU(inplace=True)`, `x.mul_(2)`).
// Autograd refuses that on a leaf that requires grad — what a stage boundary, or the profiler's
// per-layer input, gives them — but only in grad mode, before anything changes. Without grad mode
// (a checkpointed forward), or on an input that needs no gradient (the model's own input), the
// write goes through, and whatever runs the layers again on that input (the checkpointed
// micro-batch's recompute, the profiler's next pass) would start from changed values: a
// LeakyReLU applied twice. Such layers get copies of their input instead, whose gradients reach
// the originals: found from the copies' version counters on a first run, or from autograd's
// refusal, then done up front.
#pragma once

#include <cstdint>
#include <exception>
#include <vector>

#include "pipebal/pipeline/batch.h"
#include "pipebal/pipeline/layer.h"

namespace pipebal::pipeline {

// True for autograd's "a leaf Variable that requires grad is being used in an in-place
// operation" (raised before the operation changes anything).
bool is_in_place_on_leaf(const std::exception& error);

// The batch with every tensor and skip tensor copied; a copy of one that requires grad is not a
// leaf, and its gradient reaches the original.
Batch copied_inputs(const Batch& batch);

// The version counters of the batch's tensors and skip tensors, which every in-place write to
// them (or to a view of them) advances.
std::vector<int64_t> tensor_versions(const Batch& batch);

// What is known of whether a layer writes its input in place.
struct InputWrites {
  bool known = false;
  bool writes = false;
};

// layer.forward(input) without changing `input`: the first call runs on copies and learns from
// their version counters whether the layer writes its input; one that does runs on copies ever
// after, one that does not on `input` itself.
Batch forward_keeping_input(Layer& layer, const Batch& input, InputWrites& writes);

}  // namespace pipebal::pipeline
