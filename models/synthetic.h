// Synthetic training data for a model (a fixed random batch and targets, from a seed) and the
// loss that trains it. Used by `pipebal demo`, `train`, the profiler and the tests.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "pipebal/models/input_spec.h"
#include "pipebal/models/zoo.h"
#include "pipebal/pipeline/batch.h"

namespace pipebal::models {

struct SyntheticData {
  pipeline::Batch input;
  at::Tensor target;
};

// Inputs as `inputs` say (one tensor per forward argument) and a matching target: class ids for
// cross-entropy, a normal tensor of the output's shape for MSE. Throws std::invalid_argument
// when an input does not fit the model (naming the layer that rejected it).
SyntheticData make_synthetic_data(const Model& model, const std::vector<InputSpec>& inputs,
                                  uint64_t seed = 0);

// The model's own input at `shape` (batch dimension first): floats of the dtype of its first
// floating parameter (float32 without one), or token ids in [0, vocabulary) for a model that
// takes tokens. What `--input-shape` means.
std::vector<InputSpec> default_inputs(const Model& model, const std::vector<int64_t>& shape);

// The inputs a command runs `model` on: the `--input` specs when there are any (then `shape`
// must be empty), else default_inputs() at `shape` or, when it is empty, the model's default
// input shape. Throws std::invalid_argument for both, a bad spec, or neither with no default.
std::vector<InputSpec> model_inputs(const Model& model, const std::vector<std::string>& specs,
                                    const std::vector<int64_t>& shape);

// make_synthetic_data(model, default_inputs(model, shape), seed).
SyntheticData make_synthetic_data(const Model& model, const std::vector<int64_t>& shape,
                                  uint64_t seed = 0);

// Runs the first two samples of `input` through the model (evaluation mode, no autograd),
// checks that the output is one tensor with one row per sample, and returns the first sample's
// output; throws std::invalid_argument naming the layer that rejects it, or when a TorchScript
// model's layers do not reproduce its own forward (pipeline::check_matches_reference). Buffers and
// the default generator are left as they were (pipeline::RunState).
at::Tensor check_model_on(const Model& model, const pipeline::Batch& input);

// Mean loss of `output` against `target` for the model's loss kind. Cross-entropy accepts
// [N, C] with [N] targets and [N, T, C] with [N, T] targets.
at::Tensor compute_loss(LossKind kind, const at::Tensor& output, const at::Tensor& target);

// How many terms compute_loss's mean over `target` takes, for the pipeline to weigh micro-batches
// by (pipeline::LossTerms): the class ids other than -100 (ignored, as in PyTorch) for
// cross-entropy and nll; null (one per sample) for the others.
std::function<int64_t(const at::Tensor& target)> loss_terms(LossKind kind);

// compute_loss against a fixed `target`, for any output: the target follows the output's device
// (and floating dtype). What the profiler times as the last stage's loss.
std::function<at::Tensor(const at::Tensor& output)> loss_against(LossKind kind, at::Tensor target);

// Parses "32,3,64,64"; throws std::invalid_argument for an empty, non-positive or malformed shape.
std::vector<int64_t> parse_shape(const std::string& text);

}  // namespace pipebal::models
