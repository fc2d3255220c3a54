// What running layers changes besides their output: the values of their buffers (a batch
// norm's running statistics, a counter a forward updates), the sums a deferred batch norm has
// gathered, and ATen's default CPU generator.
// Reruns (a recomputation, a probe, a check on a sample) put them back, so that a layer run
// twice leaves them as once, and a check leaves the model and the generator as it found them.
#pragma once

#include <utility>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "pipebal/pipeline/batch_norm.h"
#include "pipebal/pipeline/layer_seq.h"

namespace pipebal::pipeline {

// The values of the layers' buffers now, and pipebal's batch norms' pending sums.
class BufferSnapshot {
 public:
  // Nothing when `any` is false: most stages hold no buffers, and a stage takes one per
  // micro-batch.
  explicit BufferSnapshot(const LayerSeq& layers, bool any = true);
  // Without advancing the buffers' version counters, as a batch norm's own update does not:
  // the graph of a forward that read them (and saved them) stays usable.
  void restore() const;

 private:
  std::vector<at::Tensor> buffers_, values_;
  std::vector<std::pair<BatchNormImpl*, BatchNormImpl::Pending>> pending_;
};

// The state of ATen's default CPU generator, read whole under its mutex (another thread may be
// drawing).
at::Tensor default_generator_state();

// The buffers and the default CPU generator now; put back by restore() and when it goes.
class RunState {
 public:
  explicit RunState(const LayerSeq& layers);
  ~RunState();
  RunState(const RunState&) = delete;
  RunState& operator=(const RunState&) = delete;

  void restore() const;

 private:
  BufferSnapshot buffers_;
  at::Tensor generator_state_;
};

}  // namespace pipebal::pipeline
