// Whether a TorchScript module's own forward is exactly "call each top-level child once, in
// order, each on the previous child's outputs": the only forward pipebal can cut at its
// children without changing the model. Read from the forward graph, so it holds for every
// input, not just the sample it is checked on (script_layer.cpp also compares outputs).
#pragma once

#include <string>

#include <torch/script.h>

namespace pipebal::pipeline {

// Empty when `module`'s forward is such a chain; otherwise one line saying what breaks it,
// naming the child (index, name) where the model stops being a chain.
std::string why_not_a_chain(const torch::jit::Module& module);

}  // namespace pipebal::pipeline
