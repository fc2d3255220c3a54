// Pipeline x data parallelism: R replicas of the pipeline train on R slices of the batch, and
// after each step every stage's gradients are averaged over its R replicas (an all-reduce over
// the Gloo group of that stage's ranks, in buckets), so that R replicas on batches of b train
// exactly like one pipeline on the R·b samples together.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "pipebal/distributed/group.h"
#include "pipebal/distributed/placement.h"

namespace pipebal::distributed {

class GradientAverager {
 public:
  // Every rank calls it (it joins this rank's stage group). Does nothing with one replica.
  GradientAverager(std::shared_ptr<Group> group, Placement placement,
                   int64_t bucket_bytes = int64_t{25} << 20);
  ~GradientAverager();

  // Replaces the gradient of each trainable parameter of `parameters` (this rank's stages) by
  // its mean over the stage's replicas, a replica without one counting zeros; a parameter no
  // replica has a gradient for keeps none. Every replica must pass the same parameters in the
  // same order.
  void average(const std::vector<at::Tensor>& parameters);

  // Replaces `values` (a CPU tensor) by its sum over the stage's replicas
  // (pipeline::PipelineOptions::sum_over_replicas); unchanged with one replica.
  void sum(at::Tensor& values);

  // The mean of `value` over the stage's replicas (a replica's loss -> the mini-batch's, when
  // the replicas' slices are equal); `value` itself with one replica.
  double mean(double value);

 private:
  std::shared_ptr<Group> group_;
  Placement placement_;
  int64_t bucket_bytes_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> stage_group_;
};

}  // namespace pipebal::distributed
