// TorchScript models as layer sequences: a module made in Python with torch.jit.script or
// torch.jit.trace becomes a LayerSeq with one layer per module call of its forward, the
// operators around each call included and the values used further on carried as skip tensors
// (script_split.h). A forward that cannot be cut so is refused: pipebal never runs a different
// model than the user's.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "pipebal/pipeline/layer_seq.h"

namespace pipebal::pipeline {

// The module's own forward on a batch's tensors: what the layers must reproduce.
using ReferenceForward = std::function<std::vector<at::Tensor>(const Batch& input)>;

struct ScriptModel {
  LayerSeq layers;
  ReferenceForward reference;  // shares the layers' parameters and buffers
  // Writes the module, with the layers' current (e.g. trained) parameters, as the bytes of a
  // file that torch.jit.load reads. Into a stream, not a file: LibTorch's file writer throws from
  // its destructor when the disk is full, which ends the process.
  std::function<void(std::ostream& out)> save;
};

// Loads `path` on the CPU. The first layer takes forward's arguments, the last returns its
// results (a tensor or a tuple of tensors). Throws std::invalid_argument when the file cannot
// be loaded or its forward cannot be cut (the message says why).
ScriptModel load_script_model(const std::string& path);

// load_script_model(path).layers.
LayerSeq load_torchscript(const std::string& path);

// Runs `layers` and `reference` on `sample` without autograd, in evaluation mode (restored
// afterwards), and throws std::invalid_argument when their outputs differ beyond the
// tolerance of the output's dtype. `model` names the model in the message.
void check_matches_reference(const LayerSeq& layers, const ReferenceForward& reference,
                             const Batch& sample, const std::string& model);

}  // namespace pipebal::pipeline
