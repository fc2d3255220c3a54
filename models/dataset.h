// A user's training data: a file written in Python with
//   torch.save({"inputs": x_or_list_of_tensors, "targets": y}, "data.pt")
// read with LibTorch's pickle loader, and the order in which training visits it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "pipebal/models/input_spec.h"
#include "pipebal/pipeline/batch.h"

namespace pipebal::models {

struct Dataset {
  std::vector<at::Tensor> inputs;  // one per forward argument, samples along dim 0
  at::Tensor targets;              // samples along dim 0

  int64_t size() const { return targets.size(0); }
  // The samples `indices` (a 1-D int64 tensor) as a batch and its targets.
  pipeline::Batch inputs_at(const at::Tensor& indices) const;
  at::Tensor targets_at(const at::Tensor& indices) const;
  // Converts the floating-point inputs and targets to `dtype`.
  void convert_floats(c10::ScalarType dtype);
  // The inputs as a batch of `batch` samples takes them: each one's dtype and shape.
  std::vector<InputSpec> input_specs(int64_t batch) const;
};

// Reads `path`. Throws std::invalid_argument with one line for a file that cannot be read, is not
// a dict with "inputs" (a tensor, or a list or tuple of tensors) and "targets" (a tensor), or
// whose tensors disagree on the number of samples or hold none.
Dataset load_dataset(const std::string& path);

// At most this many mini-batches (training steps) in all epochs.
constexpr int64_t kMaxBatches = 10'000'000;

// The mini-batches of `epochs` passes over `samples` samples, each as the 1-D int64 tensor of its
// sample indices: in file order (as torch.utils.data.DataLoader by default), or shuffled anew in
// each epoch from `seed`. A last mini-batch with fewer than `min_batch` samples is left out (it
// could not be cut into that many micro-batches). Throws std::invalid_argument when no
// mini-batch is left, for a batch size or epoch count below 1, or for more than kMaxBatches.
std::vector<at::Tensor> batch_order(int64_t samples, int64_t batch_size, int epochs, bool shuffle,
                                    uint64_t seed, int64_t min_batch);

}  // namespace pipebal::models
