// See run_checks.h.
#include "pipebal/workflow/run_checks.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>
#include <torch/torch.h>

#include "pipebal/common/time_limit.h"
#include "pipebal/pipeline/dtype.h"
#include "pipebal/pipeline/layer_batch_norms.h"

namespace pipebal::workflow {

void check_run_limits(int steps, int warmup_steps, double step_timeout_s) {
  if (steps < 1 || steps > kMaxSteps) {
    throw std::invalid_argument(
        fmt::format("--steps must be from 1 to {}, got {}", kMaxSteps, steps));
  }
  if (warmup_steps < 0 || warmup_steps > kMaxSteps) {
    throw std::invalid_argument(
        fmt::format("--warmup-steps must be from 0 to {}, got {}", kMaxSteps, warmup_steps));
  }
  check_time_limit(step_timeout_s, "--timeout", "none");
}

void check_layer_names(const pipeline::LayerSeq& layers, const std::vector<std::string>& planned,
                       const std::string& model) {
  if (planned.empty()) return;
  if (planned.size() != layers.size()) {
    throw std::invalid_argument(fmt::format(
        "the plan was made for a model of {} layers; {} has {}: profile and balance this model",
        planned.size(), model, layers.size()));
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i].name() == planned[i]) continue;
    throw std::invalid_argument(fmt::format(
        "the plan was made for another model: its layer {} is '{}', {}'s is '{}': profile and "
        "balance this model",
        i, planned[i], model, layers[i].name()));
  }
}

void check_data_dtype(const models::Dataset& data, const pipeline::LayerSeq& layers,
                      const std::string& path) {
  auto dtype_of = [](const pipeline::Layer& layer) -> std::optional<c10::ScalarType> {
    for (const at::Tensor& p : layer.parameters()) {
      if (p.is_floating_point()) return p.scalar_type();
    }
    return std::nullopt;
  };
  auto check = [&](const at::Tensor& t, const char* what, std::optional<c10::ScalarType> dtype,
                   const char* layer) {
    if (!dtype || t.scalar_type() == *dtype) return;
    const std::string want = pipeline::dtype_name(*dtype);
    if (t.is_complex()) {  // no --dtype makes them real: which part is meant is the user's call
      throw std::invalid_argument(fmt::format(
          "--data {}'s {} are {}, the model's {} layer's parameters {}: save them as {} (x.real, "
          "or torch.view_as_real(x) for both parts as a last dimension of 2)",
          path, what, pipeline::dtype_name(t.scalar_type()), layer, want, want));
    }
    if (!t.is_floating_point()) return;
    throw std::invalid_argument(fmt::format(
        "--data {}'s {} are {}, the model's {} layer's parameters {}: give --dtype {} (converts "
        "the data too), or save the data as {}",
        path, what, pipeline::dtype_name(t.scalar_type()), layer, want, want, want));
  };
  if (layers.empty()) return;
  // An embedding looks its input up: floating ids (token ids saved as floats) want int64, not
  // the weights' dtype.
  const std::string& first_type = layers[0].type();
  if (first_type.find("Embedding") != std::string::npos && !data.inputs.empty() &&
      data.inputs[0].is_floating_point()) {
    throw std::invalid_argument(fmt::format(
        "--data {}'s inputs are {}, but the model's first layer ({}) takes integer ids: save them "
        "as int64 (ids.long())",
        path, pipeline::dtype_name(data.inputs[0].scalar_type()), first_type));
  }
  // A linear or convolutional layer (torch.nn's, or the zoo MLP's) multiplies its input with its
  // floating-point weights: integers (ids, or pixels saved as bytes) are the wrong data, or for
  // another model. Only these exact types: a module of the user's may convert its input itself.
  const bool multiplies = first_type == "Linear" || first_type == "LinearReLU" ||
                          first_type == "Conv1d" || first_type == "Conv2d" ||
                          first_type == "Conv3d";
  const std::optional<c10::ScalarType> first_dtype = dtype_of(layers[0]);
  if (multiplies && first_dtype && !data.inputs.empty() && !data.inputs[0].is_floating_point() &&
      !data.inputs[0].is_complex()) {
    const std::string want = pipeline::dtype_name(*first_dtype);
    throw std::invalid_argument(fmt::format(
        "--data {}'s inputs are {}, but the model's first layer ({}) multiplies them with its {} "
        "weights: save them as {} (x.to(torch.{}), scaled as the model was trained on)",
        path, pipeline::dtype_name(data.inputs[0].scalar_type()), first_type, want, want, want));
  }
  for (const at::Tensor& input : data.inputs) check(input, "inputs", first_dtype, "first");
  check(data.targets, "targets", dtype_of(layers[layers.size() - 1]), "last");
}

std::optional<std::string> left_out_batch(int64_t samples, int64_t batch_size, int chunks,
                                          int replicas) {
  const int64_t least = int64_t{chunks} * std::max(replicas, 1);
  const int64_t last = batch_size > 0 ? samples % batch_size : 0;
  if (last == 0 || last >= least) return std::nullopt;
  return fmt::format(
      "the last mini-batch of each epoch ({} of the {} samples) is left out: it needs {} samples "
      "or more (--chunks {}{}); a --batch-size dividing the samples trains them all",
      last, samples, least, chunks, replicas > 1 ? fmt::format(" x --replicas {}", replicas) : "");
}

std::optional<std::string> batch_beyond_data(int64_t samples, int64_t batch_size) {
  if (batch_size <= samples) return std::nullopt;
  return fmt::format(
      "the mini-batch of {} (--batch-size, or the plan's) is more than the data's {} samples: "
      "each step trains on all {}",
      batch_size, samples, samples);
}

std::optional<std::string> nothing_to_train(const pipeline::LayerSeq& layers) {
  const std::vector<at::Tensor> parameters = layers.parameters();
  if (std::any_of(parameters.begin(), parameters.end(),
                  [](const at::Tensor& p) { return p.requires_grad(); })) {
    return std::nullopt;
  }
  return "the model has no parameters to train: its loss stays as it is (the steps still "
         "measure the pipeline)";
}

void check_batch_norm_to_defer(const pipeline::LayerSeq& layers) {
  for (size_t l = 0; l < layers.size(); ++l) {
    if (layers[l].has_other_batch_norm() || !pipeline::batch_norms_in(layers[l]).empty()) return;
  }
  throw std::invalid_argument(
      "--deferred-batch-norm: the model holds no batch norm whose statistics to defer (the zoo's "
      "resnet, unet and amoebanetd do): leave it out");
}

void check_data_has_no_nan(const models::Dataset& data, bool targets_read,
                           const std::string& path) {
  auto check = [&](const at::Tensor& t, const std::string& what) {
    if (!t.is_floating_point() && !t.is_complex()) return;
    if (t.numel() == 0) return;
    const at::Tensor nan_samples =
        torch::isnan(t).reshape({t.size(0), t.numel() / t.size(0)}).any(1);
    if (!nan_samples.any().item<bool>()) return;
    throw std::invalid_argument(fmt::format(
        "--data {}: {} holds NaN at sample {} (the loss would be NaN): clean or drop it", path,
        what, nan_samples.nonzero()[0][0].item<int64_t>()));
  };
  for (size_t i = 0; i < data.inputs.size(); ++i) {
    check(data.inputs[i], data.inputs.size() == 1 ? "inputs" : fmt::format("inputs[{}]", i));
  }
  if (targets_read) check(data.targets, "targets");
}

void check_targets(const models::Dataset& data, models::LossKind loss,
                   const at::Tensor& sample_output, const std::string& path) {
  if (loss == models::LossKind::kNone || sample_output.dim() == 0) return;
  const at::Tensor& targets = data.targets;
  const std::string name = models::to_string(loss);
  if (!sample_output.is_floating_point()) {  // an argmax, say: nothing to differentiate
    throw std::invalid_argument(fmt::format(
        "the model's output is {}, not floating point: no loss can be trained on it (return the "
        "scores, not the classes)",
        pipeline::dtype_name(sample_output.scalar_type())));
  }
  const std::vector<int64_t> per_sample(targets.sizes().begin() + 1, targets.sizes().end());
  std::vector<int64_t> wanted(sample_output.sizes().begin() + 1, sample_output.sizes().end());
  if (loss == models::LossKind::kMse) {
    if (!targets.is_floating_point()) {
      throw std::invalid_argument(fmt::format(
          "--data {}: mse needs floating-point targets, these are {} (class ids? give --loss "
          "cross_entropy)",
          path, pipeline::dtype_name(targets.scalar_type())));
    }
    if (per_sample != wanted) {
      throw std::invalid_argument(fmt::format(
          "--data {}: a sample's target has shape {}, the model's output {}: mse compares them "
          "element by element",
          path, c10::str(c10::IntArrayRef(per_sample)), c10::str(c10::IntArrayRef(wanted))));
    }
    return;
  }
  if (targets.is_floating_point() || targets.is_complex()) {
    throw std::invalid_argument(fmt::format(
        "--data {}: {} reads class ids (integers), the targets are {} (regression targets? give "
        "--loss mse)",
        path, name, pipeline::dtype_name(targets.scalar_type())));
  }
  const int64_t classes = wanted.empty() ? 0 : wanted.back();
  if (!wanted.empty()) wanted.pop_back();
  if (sample_output.dim() < 2 || per_sample != wanted) {
    throw std::invalid_argument(fmt::format(
        "--data {}: {} reads one class id per output row of scores; a sample's targets have "
        "shape {}, the model's output {} per sample",
        path, name, c10::str(c10::IntArrayRef(per_sample)),
        c10::str(sample_output.sizes().slice(1))));
  }
  if (targets.numel() == 0) return;
  const at::Tensor ids = targets.to(at::kLong).reshape({targets.size(0), -1});
  if (!ids.ne(models::kIgnoredClass).any().item<bool>()) {
    throw std::invalid_argument(fmt::format(
        "--data {}: every target is -100, the ignored class id: there is no loss to train on",
        path));
  }
  const at::Tensor bad = ((ids < 0) & (ids != models::kIgnoredClass)) | (ids >= classes);
  const at::Tensor bad_samples = bad.any(1);
  if (!bad_samples.any().item<bool>()) return;
  const int64_t sample = bad_samples.nonzero()[0][0].item<int64_t>();
  const int64_t id = ids[sample].masked_select(bad[sample])[0].item<int64_t>();
  throw std::invalid_argument(
      fmt::format("--data {}: sample {} has class id {}, the model's output has {} classes (ids "
                  "0 to {}, or -100 to ignore)",
                  path, sample, id, classes, classes - 1));
}

void check_something_trains(const pipeline::LayerSeq& layers) {
  bool trainable = false;
  for (const at::Tensor& p : layers.parameters()) {
    if (!p.requires_grad()) continue;
    if (p.grad().defined()) return;
    trainable = true;
  }
  if (!trainable) return;
  throw std::invalid_argument(
      "no parameter of the model got a gradient in the first step: the loss does not depend on "
      "them (is the model's output detached?), so training would change nothing");
}

}  // namespace pipebal::workflow
