// Batch normalisation that can defer its running-statistics update to the end of a pipelined
// mini-batch (torchgpipe's DeferredBatchNorm). Normalisation always uses the statistics of
// the tensor it sees (a micro-batch); in deferred mode the running mean and variance are
// updated once per mini-batch, from sums accumulated over its micro-batches, so they equal
// what the plain model computes on the whole batch. The zoo models use it for every BN.
#pragma once

#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

namespace pipebal::pipeline {

struct BatchNormImpl : torch::nn::Cloneable<BatchNormImpl> {
  explicit BatchNormImpl(int64_t features, double momentum = 0.1, double eps = 1e-5);

  void reset() override;
  // Input [N, features, ...].
  at::Tensor forward(const at::Tensor& input);

  // Deferred mode: accumulate instead of updating the running statistics. Turning it off
  // discards anything not committed.
  void set_deferred(bool on);
  // Folds the accumulated statistics into the running ones as one momentum update.
  void commit();
  // What deferred mode accumulated since the last commit, as one float64 tensor on the module's
  // device: [sum over features, sum of squares, sample count]; zeros before any. Replicas of a
  // pipeline sum theirs before they commit, so that the running statistics are their whole
  // mini-batch's.
  at::Tensor pending_statistics() const;
  void set_pending_statistics(const at::Tensor& statistics);

  // The pending sums as they stand, to be put back after a forward whose run is discarded (a
  // probe of the generator run again, a write to an input refused): each micro-batch counts once.
  struct Pending {
    at::Tensor sum, sum_squares;  // never written in place: a later micro-batch adds new ones
    int64_t count = 0;
  };
  Pending pending() const { return {sum_, sum_squares_, count_}; }
  void restore_pending(Pending pending);

  int64_t features_;
  double momentum_;
  double eps_;
  at::Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 private:
  bool deferred_ = false;
  at::Tensor sum_, sum_squares_;
  int64_t count_ = 0;
};
TORCH_MODULE(BatchNorm);

// Set by the engine while it recomputes a checkpointed micro-batch on this thread, so that
// the recomputation does not count the micro-batch's statistics a second time.
bool is_recomputing();
class RecomputeScope {
 public:
  RecomputeScope();
  ~RecomputeScope();
  RecomputeScope(const RecomputeScope&) = delete;
  RecomputeScope& operator=(const RecomputeScope&) = delete;

 private:
  bool previous_;
};

}  // namespace pipebal::pipeline
