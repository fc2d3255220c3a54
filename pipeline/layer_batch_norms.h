// pipebal's BatchNorms inside a layer: what deferral, a rerun's snapshot and the checks on
// --deferred-batch-norm look for.
#pragma once

#include <vector>

#include "pipebal/pipeline/batch_norm.h"
#include "pipebal/pipeline/layer.h"

namespace pipebal::pipeline {

// The BatchNorms among `layer`'s modules, in order (none in a TorchScript layer, whose batch
// norms are its own).
std::vector<BatchNormImpl*> batch_norms_in(const Layer& layer);

}  // namespace pipebal::pipeline
