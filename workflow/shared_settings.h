// What every process of a multi-process training run must share (distributed/
// settings_agreement.h): the pipebal build, the flags that shape the pipeline and the training,
// and digests of the model's weights and of the data, whose files may lie at other paths on
// other hosts. What may differ between hosts is left out: the devices, the threads, the
// timeout, and the output paths (rank 0 alone writes).
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "pipebal/distributed/settings_agreement.h"
#include "pipebal/models/dataset.h"
#include "pipebal/models/zoo.h"
#include "pipebal/workflow/training_run.h"

namespace pipebal::workflow {

// A digest of the tensors' dtypes, shapes and bytes (FNV-1a over 64-bit words): it tells apart
// contents that differ by accident, not ones made to collide.
uint64_t content_digest(const std::vector<at::Tensor>& tensors);

// `settings` as given (before --data fills in the steps and shape), with the model built from
// them and the data loaded, if any.
distributed::SharedSettings shared_settings(const TrainSettings& settings,
                                            const models::Model& model,
                                            const models::Dataset* data);

}  // namespace pipebal::workflow
