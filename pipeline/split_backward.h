// A backward split into B and W without doing any of it twice (zero-bubble schedules).
//
// B back-propagates a stage's output gradients to its inputs only: autograd runs just the
// nodes on paths to the inputs, and a node where a parameter's branch leaves that path (e.g. a
// Linear's addmm, whose other branch is the weight) computes only its input-path gradient. B
// keeps the gradient arriving at each such node. W later runs each of those nodes again from the
// kept gradient with the parameters as the only outputs, so it computes exactly the weight
// gradients B skipped, and accumulates them into the parameters' .grad. Once B is done, the
// kept nodes' edges toward the input are cut, so that autograd, which walks the whole graph
// below a run's root before running it, sees only that node's parameter branch: the stage's W
// then costs what its layers' W's cost apart, however deep the stage.
//
// When a parameter is also reached along the input path (a weight used before and after a
// layer that needs the input's gradient, e.g. tied embeddings), W from the kept gradient would
// count part of its gradient twice: that backward is not split — B does all of it and W nothing
// (weight_deferred() is false).
#pragma once

#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

namespace pipebal::pipeline {

class SplitBackward {
 public:
  // Runs B: the gradients of `inputs` (leaves; undefined for those not requiring a gradient)
  // from `roots` (outputs) given their gradients `grads`. `params` are the parameters W will
  // differentiate. The autograd graph is kept for W. Roots and gradients are handed over as in
  // handed_backward(): moved in, each goes once B is done with it, unless W needs it.
  SplitBackward(std::vector<at::Tensor> roots, std::vector<at::Tensor> grads,
                const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& params);
  ~SplitBackward();
  SplitBackward(SplitBackward&&) noexcept;
  SplitBackward& operator=(SplitBackward&&) noexcept;

  // The inputs' gradients B computed, one per input.
  const std::vector<at::Tensor>& input_grads() const { return input_grads_; }
  // False when B already did the whole backward (see above), and W has nothing to do.
  bool weight_deferred() const;
  // Bytes of the gradients B kept for W (held until run_weight()).
  int64_t kept_bytes() const;

  // Runs W once: accumulates the parameters' gradients.
  void run_weight();

 private:
  struct Deferred;
  std::vector<at::Tensor> input_grads_;
  std::unique_ptr<Deferred> deferred_;
};

}  // namespace pipebal::pipeline
