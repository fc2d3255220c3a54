// See handed_backward.h.
#include "pipebal/pipeline/handed_backward.h"

#include <memory>
#include <stdexcept>
#include <utility>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>

#include "pipebal/common/aligned_stack.h"

namespace pipebal::pipeline {
namespace {

using torch::autograd::edge_list;
using torch::autograd::variable_list;

// The graph's root: when the engine runs it, it passes on the gradients it was given and keeps
// none. The engine starts it from an empty gradient of its own.
struct HandOver : torch::autograd::Node {
  HandOver(edge_list roots, variable_list grads, const at::Tensor& start)
      : Node(std::move(roots)), grads_(std::move(grads)) {
    add_input_metadata(start);
  }
  variable_list apply(variable_list&& /*start*/) override { return std::move(grads_); }
  variable_list grads_;
};

}  // namespace

std::vector<at::Tensor> handed_execute(edge_list roots, std::vector<at::Tensor> grads,
                                       bool keep_graph, bool accumulate_grad,
                                       const edge_list& outputs) {
  if (roots.size() != grads.size()) {
    throw std::invalid_argument("handed_execute: one gradient per root");
  }
  // On the gradients' device, as the engine's own root: the stream they were made on. Empty: it
  // allocates nothing.
  at::TensorOptions options = at::TensorOptions().dtype(at::kFloat);
  for (const at::Tensor& grad : grads) {
    if (grad.defined()) {
      options = grad.options();
      break;
    }
  }
  const at::Tensor start = at::empty({0}, options);
  auto root = std::make_shared<HandOver>(std::move(roots), std::move(grads), start);
  // On the CPU autograd runs the kernels on this thread: at one stack alignment, whichever
  // thread and depth this is called from (common/aligned_stack.h).
  std::vector<at::Tensor> computed;
  on_aligned_stack([&] {
    computed = torch::autograd::Engine::get_default_engine().execute(
        {torch::autograd::Edge(std::move(root), 0)}, {start}, keep_graph, /*create_graph=*/false,
        accumulate_grad, outputs);
  });
  return computed;
}

void handed_backward(std::vector<at::Tensor> roots, std::vector<at::Tensor> grads) {
  if (roots.empty()) return;
  edge_list edges;
  edges.reserve(roots.size());
  for (const at::Tensor& root : roots) {
    edges.push_back(torch::autograd::impl::gradient_edge(root));
  }
  roots.clear();
  handed_execute(std::move(edges), std::move(grads), /*keep_graph=*/false,
                 /*accumulate_grad=*/true);
}

}  // namespace pipebal::pipeline
