// Pipeline's deferred batch norm (PipelineOptions::deferred_batch_norm): the BatchNorms of its
// stages, switched to accumulate for a step and committed once after it, their sums added over
// the replicas of the pipeline first.
#include <vector>

#include <ATen/ATen.h>

#include "pipebal/pipeline/batch_norm.h"
#include "pipebal/pipeline/layer_batch_norms.h"
#include "pipebal/pipeline/pipeline.h"

namespace pipebal::pipeline {

std::vector<BatchNormImpl*> Pipeline::batch_norms(bool local_only) const {
  std::vector<BatchNormImpl*> norms;
  size_t first = 0;
  for (size_t s = 0; s < balance_.size(); ++s) {
    const size_t end = first + static_cast<size_t>(balance_[s]);
    for (size_t l = first; l < end && (stages_[s] || !local_only); ++l) {
      for (BatchNormImpl* bn : batch_norms_in(layers_[l])) norms.push_back(bn);
    }
    first = end;
  }
  return norms;
}

void Pipeline::set_deferred_batch_norm(bool on, bool commit) {
  for (BatchNormImpl* bn : batch_norms(/*local_only=*/false)) {
    if (commit) bn->commit();
    bn->set_deferred(on);
  }
}

void Pipeline::sum_batch_norm_statistics() {
  const std::vector<BatchNormImpl*> norms = batch_norms(/*local_only=*/true);
  if (norms.empty()) return;  // alike on every replica: they hold the same stages
  std::vector<at::Tensor> pending;
  for (const BatchNormImpl* bn : norms) pending.push_back(bn->pending_statistics());
  at::Tensor all = at::cat(pending).cpu();  // a process's stages share its device
  options_.sum_over_replicas(all);
  int64_t offset = 0;
  for (size_t i = 0; i < norms.size(); ++i) {
    norms[i]->set_pending_statistics(all.narrow(0, offset, pending[i].numel()));
    offset += pending[i].numel();
  }
}

}  // namespace pipebal::pipeline
