// TorchScript models as layer sequences: a module made in Python with torch.jit.script or
// torch.jit.trace whose top-level children run in order (an nn.Sequential, typically)
// becomes a LayerSeq with one layer per child.
#pragma once

#include <string>

#include "pipeline/layer_seq.h"

namespace pipebal::pipeline {

// Loads `path` on the CPU. A child's forward takes the batch's tensors as positional
// arguments and may return a tensor or a tuple of tensors. Throws std::invalid_argument when
// the file cannot be loaded or has no children.
LayerSeq load_torchscript(const std::string& path);

}  // namespace pipebal::pipeline
