// Back-propagation that lets go of its roots and their gradients as soon as autograd is done
// with them.
//
// torch::autograd::backward(roots, grads) and Engine::execute hold every root and gradient they
// are given until the whole backward ends. Inside a stage, the gradient at a layer's output is
// autograd's own and goes once the layer's last node has used it, and the output itself once no
// node keeps it saved. Handing the stage's outputs and received gradients over the same way makes
// the stage's last layer run its backward like every other (the stage holds neither through it),
// and lets the profiler measure one layer's backward as it runs inside a stage.
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/csrc/autograd/edge.h>

namespace pipebal::pipeline {

// Engine::execute(roots, grads, keep_graph, /*create_graph=*/false, accumulate_grad, outputs)
// with `grads` (one per root, shaped like it) moved in: autograd alone holds each.
std::vector<at::Tensor> handed_execute(std::vector<torch::autograd::Edge> roots,
                                       std::vector<at::Tensor> grads, bool keep_graph,
                                       bool accumulate_grad,
                                       const std::vector<torch::autograd::Edge>& outputs = {});

// torch::autograd::backward(roots, grads) through handed_execute(); a caller that moves both in
// and keeps no other handle frees each as soon as autograd is done with it. No-op without roots.
void handed_backward(std::vector<at::Tensor> roots, std::vector<at::Tensor> grads);

}  // namespace pipebal::pipeline
