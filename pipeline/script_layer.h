// TorchScript models as layer sequences: a module made in Python with torch.jit.script or
// torch.jit.trace whose forward calls its top-level children one after another, each on the
// previous one's outputs (an nn.Sequential, typically), becomes a LayerSeq with one layer per
// child. Any other forward is refused: pipebal never runs a different model than the user's.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "pipeline/layer_seq.h"

namespace pipebal::pipeline {

// The module's own forward on a batch's tensors: what the layers must reproduce.
using ReferenceForward = std::function<std::vector<at::Tensor>(const Batch& input)>;

struct ScriptModel {
  LayerSeq layers;
  ReferenceForward reference;  // shares the layers' parameters and buffers
  // Writes the module, with the layers' current (e.g. trained) parameters, to a file that
  // torch.jit.load reads.
  std::function<void(const std::string& path)> save;
};

// Loads `path` on the CPU. A child's forward takes the batch's tensors as positional
// arguments and may return a tensor or a tuple of tensors. Throws std::invalid_argument when
// the file cannot be loaded, has no children, or its forward is not a chain of its children
// (the message says what breaks the chain, where, and what to do).
ScriptModel load_script_model(const std::string& path);

// load_script_model(path).layers.
LayerSeq load_torchscript(const std::string& path);

// Runs `layers` and `reference` on `sample` without autograd, in evaluation mode (restored
// afterwards), and throws std::invalid_argument when their outputs differ beyond the
// tolerance of the output's dtype. `model` names the model in the message.
void check_matches_reference(const LayerSeq& layers, const ReferenceForward& reference,
                             const Batch& sample, const std::string& model);

}  // namespace pipebal::pipeline
