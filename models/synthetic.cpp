// See synthetic.h.
#include "pipebal/models/synthetic.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "pipebal/common/parse_integers.h"
#include "pipebal/pipeline/error_text.h"
#include "pipebal/pipeline/run_state.h"

namespace pipebal::models {
namespace {

// Runs the layers one by one so that a failure names the layer, e.g. a wrong input shape.
pipeline::Batch forward_naming_layer(const pipeline::LayerSeq& layers, pipeline::Batch batch) {
  for (size_t i = 0; i < layers.size(); ++i) {
    try {
      batch = layers[i].forward(std::move(batch));
    } catch (const std::exception& error) {
      const std::string cause = pipeline::error_summary(error);
      // Refused by the allocator (workflow/cpu_memory_guard.h, or LibTorch's own): no fault of
      // the input's. Inside TorchScript the error arrives retyped, with its text kept.
      const bool out_of_memory = dynamic_cast<const c10::OutOfMemoryError*>(&error) != nullptr ||
                                 cause.find("cannot allocate ") != std::string::npos ||
                                 cause.find("can't allocate memory") != std::string::npos;
      // LibTorch 1.x has few float16 kernels on CPUs, 2.x more: the dtype is not refused ahead.
      const bool half = cause.find("not implemented for 'Half'") != std::string::npos;
      // An embedding's words for an id at or past its table's size.
      const bool index = cause.find("index out of range in self") != std::string::npos;
      throw std::invalid_argument(fmt::format(
          "layer {} ('{}', {}) {}: {}{}", i, layers[i].name(), layers[i].type(),
          out_of_memory ? "ran out of memory" : "rejected its input", cause,
          half ? " (this LibTorch lacks that float16 kernel on this device: use --dtype bfloat16 "
                 "or float32)"
          : index ? " (an index at or past the size of the layer's table: token ids must be below "
                    "its embedding's vocabulary)"
                  : ""));
    }
  }
  return batch;
}

}  // namespace

// Far beyond a real sample; keeps sizes and their arithmetic well inside 64 bits.
constexpr int64_t kMaxDimension = (int64_t{1} << 31) - 1;

std::vector<int64_t> parse_shape(const std::string& text) {
  const auto shape = parse_integer_list(text);
  if (!shape || std::any_of(shape->begin(), shape->end(), [](int64_t d) { return d < 1; })) {
    throw std::invalid_argument(
        fmt::format("input shape '{}': expected positive integers separated by commas", text));
  }
  for (int64_t d : *shape) {
    if (d > kMaxDimension) {
      throw std::invalid_argument(fmt::format(
          "input shape '{}': {} is more than {} in one dimension", text, d, kMaxDimension));
    }
  }
  return *shape;
}

at::Tensor check_model_on(const Model& model, const pipeline::Batch& input) {
  // The zoo's models read one tensor; a second would be carried along unread. (A TorchScript
  // model's first layer counts its own arguments.)
  if (!model.reference && input.tensors.size() != 1) {
    throw std::invalid_argument(fmt::format("model {} takes one input tensor, given {}",
                                            model.info.name, input.tensors.size()));
  }
  // Two samples through the model (no grad, evaluation mode) check the shape and give the
  // output's shape: with one, a layer that keeps only the first row (x[:1]) would pass.
  const int64_t rows = input.tensors.empty() ? 1 : std::min<int64_t>(2, input.tensors[0].size(0));
  pipeline::Batch sample;
  for (const auto& t : input.tensors) sample.tensors.push_back(t.narrow(0, 0, rows));
  // The check leaves the buffers and the random state as it found them: a model that counts its
  // calls, or draws in evaluation mode, trains (and is saved) as if it had not run.
  const pipeline::RunState untouched(model.layers);
  at::Tensor output;
  {
    torch::NoGradGuard no_grad;
    const bool training = !model.layers.empty() && model.layers[0].is_training();
    model.layers.train(false);
    pipeline::Batch outputs;
    try {
      outputs = forward_naming_layer(model.layers, sample);
    } catch (const std::invalid_argument& error) {
      // A model written for one batch size (a reshape to view(8, -1)) fails on the sample's
      // rows and runs on the whole batch: say that, not only what the layer said of 2 rows.
      const int64_t batch = input.tensors.empty() ? rows : input.tensors[0].size(0);
      bool runs_on_batch = false;
      if (batch > rows) {
        try {
          forward_naming_layer(model.layers, input);
          runs_on_batch = true;
        } catch (const std::exception&) {
        }
      }
      model.layers.train(training);
      if (!runs_on_batch) {
        // The shapes it names are the checked rows' (2x12), not the batch the user gave.
        std::string each;
        if (!input.tensors.empty() && input.tensors[0].dim() > 1) {
          each = fmt::format(", [{}] each", fmt::join(input.tensors[0].sizes().slice(1), ","));
        }
        const std::string which = rows == batch
                                      ? fmt::format("its {} sample{}", rows, rows == 1 ? "" : "s")
                                      : fmt::format("its first {} samples", rows);
        throw std::invalid_argument(
            fmt::format("{}; the input checked on {}{}", error.what(), which, each));
      }
      throw std::invalid_argument(fmt::format(
          "the model runs on a batch of {} but not on {} samples ({}): pipebal cuts batches into "
          "micro-batches of other sizes, so the model must take any batch size (does it reshape "
          "to a fixed batch, e.g. view({}, -1)?)",
          batch, rows, error.what(), batch));
    } catch (...) {
      model.layers.train(training);
      throw;
    }
    model.layers.train(training);
    // The loss reads one output: the layers only the others reach would never train.
    if (outputs.tensors.size() > 1) {
      throw std::invalid_argument(fmt::format(
          "model '{}' returns {} tensors, but pipebal trains a loss on one output (what only "
          "the others depend on would get no gradient): return the output the loss reads",
          model.layers.name(), outputs.tensors.size()));
    }
    output = outputs.value();
  }
  // Micro-batches are cut, and losses and targets taken, along the output's first dimension too.
  if (output.dim() > 0 && output.size(0) != rows) {
    throw std::invalid_argument(fmt::format(
        "the model's output has {} row{} for {} (shape {}): pipebal trains models "
        "whose output has one row per sample, batch first",
        output.size(0), output.size(0) == 1 ? "" : "s",
        rows == 1 ? "one sample" : fmt::format("{} samples", rows), c10::str(output.sizes())));
  }
  // A TorchScript model's layers must be the model: compare them with its own forward.
  if (model.reference) {
    pipeline::check_matches_reference(model.layers, model.reference, sample, model.layers.name());
  }
  return output.dim() > 0 ? output.narrow(0, 0, 1) : output;
}

std::vector<InputSpec> default_inputs(const Model& model, const std::vector<int64_t>& shape) {
  if (shape.empty()) throw std::invalid_argument("input shape is empty");
  InputSpec spec;
  spec.shape = shape;
  if (model.info.input == InputKind::kTokens) {
    spec.dtype = c10::kLong;
    spec.high = model.classes;
    return {spec};
  }
  // Floats of the model's own dtype (a float64 TorchScript model's), as its first parameters.
  for (size_t i = 0; i < model.layers.size(); ++i) {
    for (const at::Tensor& p : model.layers[i].parameters()) {
      if (!p.is_floating_point()) continue;
      spec.dtype = p.scalar_type();
      return {spec};
    }
  }
  return {spec};
}

std::vector<InputSpec> model_inputs(const Model& model, const std::vector<std::string>& specs,
                                    const std::vector<int64_t>& shape) {
  if (!specs.empty()) {
    if (!shape.empty()) {
      throw std::invalid_argument("give --input or --input-shape, not both");
    }
    return parse_input_specs(specs);
  }
  if (shape.empty() && model.info.default_input_shape.empty()) {
    throw std::invalid_argument(fmt::format(
        "model '{}' has no default input: give --input-shape or --input", model.layers.name()));
  }
  return default_inputs(model, shape.empty() ? model.info.default_input_shape : shape);
}

SyntheticData make_synthetic_data(const Model& model, const std::vector<int64_t>& shape,
                                  uint64_t seed) {
  return make_synthetic_data(model, default_inputs(model, shape), seed);
}

SyntheticData make_synthetic_data(const Model& model, const std::vector<InputSpec>& inputs,
                                  uint64_t seed) {
  if (inputs.empty()) throw std::invalid_argument("the model needs at least one input");
  torch::manual_seed(seed);
  std::vector<at::Tensor> tensors;
  for (const InputSpec& spec : inputs) tensors.push_back(make_input(spec));
  SyntheticData data;
  data.input = pipeline::Batch(std::move(tensors));

  const at::Tensor probe_output = check_model_on(model, data.input);
  // Targets are made per sample, like the output's first dimension.
  if (probe_output.dim() == 0) {
    throw std::invalid_argument(
        "the model's output is a single number, not one per sample: synthetic targets cannot "
        "be made for it");
  }
  if (!probe_output.is_floating_point()) {
    throw std::invalid_argument(
        fmt::format("the model's output is {}, not floating point: no loss can be trained on it",
                    c10::toString(probe_output.scalar_type())));
  }

  std::vector<int64_t> out_shape = probe_output.sizes().vec();
  out_shape[0] = inputs[0].shape[0];
  if (model.info.loss == LossKind::kMse) {
    // In the output's dtype: a float64 model's loss needs float64 targets.
    data.target = torch::randn(out_shape, torch::TensorOptions().dtype(probe_output.scalar_type()));
  } else {
    out_shape.pop_back();  // class ids: one per sample (or per token)
    data.target = torch::randint(probe_output.size(-1), out_shape, torch::kLong);
  }
  return data;
}

at::Tensor compute_loss(LossKind kind, const at::Tensor& output, const at::Tensor& target) {
  switch (kind) {
    case LossKind::kMse:
      return torch::mse_loss(output, target);
    case LossKind::kNone:
      if (output.numel() != 1) {
        throw std::invalid_argument(fmt::format(
            "--loss none: the model's output must be its loss (one value), got shape {}",
            c10::str(output.sizes())));
      }
      return output.reshape({});
    case LossKind::kCrossEntropy:
    case LossKind::kNll:
      break;
  }
  if (output.dim() != target.dim() + 1 || target.is_floating_point()) {
    throw std::invalid_argument(fmt::format("{}: output {} does not match class ids {}",
                                            to_string(kind), c10::str(output.sizes()),
                                            c10::str(target.sizes())));
  }
  const at::Tensor flat = output.reshape({-1, output.size(-1)});
  // Class ids of any integer type (int32, bool, ...) are LibTorch's int64 ones.
  const at::Tensor ids = target.reshape({-1}).to(at::kLong);
  return kind == LossKind::kNll ? torch::nll_loss(flat, ids) : torch::cross_entropy_loss(flat, ids);
}

std::function<int64_t(const at::Tensor& target)> loss_terms(LossKind kind) {
  if (kind != LossKind::kCrossEntropy && kind != LossKind::kNll) return nullptr;
  // As compute_loss reads them: int64 (a uint8 156 is no -100).
  return [](const at::Tensor& target) {
    return target.to(at::kLong).ne(kIgnoredClass).sum().item<int64_t>();
  };
}

std::function<at::Tensor(const at::Tensor& output)> loss_against(LossKind kind, at::Tensor target) {
  return [kind, target = std::move(target)](const at::Tensor& output) {
    const at::Tensor t = target.is_floating_point()
                             ? target.to(output.device(), output.scalar_type())
                             : target.to(output.device());
    return compute_loss(kind, output, t);
  };
}

}  // namespace pipebal::models
