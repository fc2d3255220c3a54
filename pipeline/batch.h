// One (micro-)batch flowing through the layer sequence: one or more tensors, plus the named
// skip tensors that a layer stashes for a later layer to pop (U-Net's encoder-decoder links).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace pipebal::pipeline {

struct Batch {
  std::vector<at::Tensor> tensors;
  std::map<std::string, at::Tensor> skips;

  Batch() = default;
  explicit Batch(at::Tensor tensor) { tensors.push_back(std::move(tensor)); }
  explicit Batch(std::vector<at::Tensor> values) : tensors(std::move(values)) {}

  // The main tensor (the first); throws std::invalid_argument when the batch is empty.
  const at::Tensor& value() const;
  at::Tensor& value();

  // Number of samples: the size of dim 0, which every tensor and skip tensor shares.
  int64_t size() const;

  // Copies every tensor and skip tensor to `device` (no copy when already there).
  Batch to(const c10::Device& device) const;
};

// Splits along dim 0 into exactly `chunks` micro-batches whose sizes differ by at most one
// (the first ones take the remainder: 10 samples in 4 chunks → 3, 3, 2, 2). Skip tensors are
// split alike. Throws std::invalid_argument when chunks < 1, when there are more chunks than
// samples, or when the tensors disagree on dim 0.
std::vector<Batch> scatter(const Batch& batch, int chunks);

// Concatenates micro-batches along dim 0, tensor by tensor and skip by skip; the inverse of
// scatter. Throws std::invalid_argument when the parts do not have the same structure.
Batch gather(const std::vector<Batch>& parts);

// The sizes scatter() uses: `chunks` values summing to `samples`.
std::vector<int64_t> micro_batch_sizes(int64_t samples, int chunks);

}  // namespace pipebal::pipeline
