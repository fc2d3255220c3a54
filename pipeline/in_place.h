// Layers that write their input in place (a first `nn.ReLU(inplace=True)`, `x.add_(...)`)
// cannot take a leaf tensor that requires grad — and a leaf is what a stage boundary, or the
// profiler's per-layer input, gives them. Such a layer gets a non-leaf copy of its input
// instead, whose gradient reaches the leaf: found on its first failure, then done up front.
#pragma once

#include <exception>

#include "pipeline/batch.h"
#include "pipeline/layer.h"

namespace pipebal::pipeline {

// True for autograd's "a leaf Variable that requires grad is being used in an in-place
// operation" (raised before the operation changes anything).
bool is_in_place_on_leaf(const std::exception& error);

// The batch with every tensor and skip tensor that is a leaf requiring grad replaced by a copy
// that is not a leaf.
Batch non_leaf_inputs(const Batch& batch);

// layer.forward(input), or, when the layer writes a leaf input in place, the same on
// non_leaf_inputs(input); `writes_input` remembers it (and, once set, skips the first try).
Batch forward_tolerating_in_place(Layer& layer, const Batch& input, bool& writes_input);

}  // namespace pipebal::pipeline
