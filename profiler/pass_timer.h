// Times every layer of a model inside whole forward and backward passes, the way a stage runs
// them (the profiler's timing loop; profiler.h).
#pragma once

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "pipebal/pipeline/batch.h"
#include "pipebal/pipeline/in_place.h"
#include "pipebal/pipeline/layer_seq.h"
#include "pipebal/profiler/profiler.h"
#include "pipebal/profiler/timer.h"

namespace pipebal::profiler {

// The loss a model's last layer's output is reduced to, as on the last stage.
using LossFn = std::function<at::Tensor(const at::Tensor&)>;

// A detached copy of every tensor; floating ones become leaves requiring grad when asked.
pipeline::Batch as_leaves(const pipeline::Batch& batch, bool requires_grad);

// Times every layer inside whole forward and backward passes over the model, the way a stage
// runs them: each layer gets the previous layer's fresh output (detached, as at a stage
// boundary), and each backward starts from the gradient the next layer's backward produced.
// Timing each layer in isolation instead, repeated with its own data hot in cache, measured
// sums of layers below a whole step (reports/profiler-bench.md). The parameters' gradients stay
// between passes, zeroed, so that each backward adds into them as a training step's does (a
// step zeroes them, or with LibTorch 2.x leaves them none for its first micro-batch only): a
// backward that finds none hands its own over instead, a pass over every gradient less.
class PassTimer {
 public:
  PassTimer(pipeline::LayerSeq& layers, pipeline::Batch sample, LossFn loss)
      : layers_(layers), sample_(std::move(sample)), loss_(std::move(loss)) {}

  // What an autograd run costs beyond its work (autograd_run_cost.h): taken off each timed
  // backward that ran one, as a stage runs one per action over all its layers.
  void set_autograd_run_ms(double run_ms) { autograd_run_ms_ = run_ms; }
  // The model's gradients as found: none.
  ~PassTimer();
  PassTimer(const PassTimer&) = delete;
  PassTimer& operator=(const PassTimer&) = delete;

  // One forward and one backward pass; with a timer, appends each layer's durations. With
  // `split`, each layer's backward runs as B then W (split_backward.h), and B and W are timed
  // (not the forward).
  void run(LayerTimer* timer, std::vector<LayerProfile>* profiles, bool split = false);

 private:
  // Layer k's backward as B, then W, each timed (B from the caller's start of `timer`); the
  // input's gradients are left in its .grad, where the layer before finds them as after a whole
  // backward.
  void split_backward(size_t k, const std::vector<at::Tensor>& roots,
                      const std::vector<at::Tensor>& grads, std::vector<pipeline::Batch>& inputs,
                      LayerTimer* timer, std::vector<LayerProfile>* profiles);

  double less_run(double measured_ms, bool ran) const {
    return ran ? std::max(0.0, measured_ms - autograd_run_ms_) : measured_ms;
  }

  pipeline::LayerSeq& layers_;
  double autograd_run_ms_ = 0;
  // Whether each layer writes its input in place (in_place.h): the sample and each layer's input
  // are the same in every pass, and the co-runners read the sample meanwhile.
  std::vector<pipeline::InputWrites> input_writes_ =
      std::vector<pipeline::InputWrites>(layers_.size());
  pipeline::Batch sample_;
  LossFn loss_;
};

}  // namespace pipebal::profiler
