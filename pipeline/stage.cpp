// See stage.h.
#include "pipebal/pipeline/stage.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <torch/torch.h>

#include "pipebal/pipeline/batch_norm.h"
#include "pipebal/pipeline/dropout.h"
#include "pipebal/pipeline/error_text.h"
#include "pipebal/pipeline/handed_backward.h"
#include "pipebal/pipeline/in_place.h"
#include "pipebal/pipeline/run_state.h"
#include "pipebal/pipeline/transfer.h"

namespace pipebal::pipeline {
namespace {

// ATen's default generator is process-wide. Stages with layers that draw from it hold this
// lock while they seed it and draw from it, so that a micro-batch's draws depend only on its
// seed, whatever other stages do at the same time. Deterministic stages, and CPU stages whose
// random layers draw from the stage's own generator (dropout.h), never take it.
// A stage finding out whether it draws (run_probing_generator) holds it shared: probes run
// side by side, never beside a stage that seeds the generator.
std::shared_mutex& default_generator_mutex() {
  static std::shared_mutex mutex;
  return mutex;
}

// Whether `holds` is true of every defined tensor and skip tensor of the batch.
template <typename Predicate>
bool every_tensor(const Batch& batch, Predicate holds) {
  for (const auto& t : batch.tensors) {
    if (t.defined() && !holds(t)) return false;
  }
  for (const auto& [name, t] : batch.skips) {
    if (t.defined() && !holds(t)) return false;
  }
  return true;
}

bool all_require_grad(const Batch& batch) {
  return every_tensor(batch, [](const at::Tensor& t) { return t.requires_grad(); });
}

bool all_leaves_requiring_grad(const Batch& batch) {
  return every_tensor(batch, [](const at::Tensor& t) { return t.is_leaf() && t.requires_grad(); });
}

// A leaf with a version counter of its own: the first stage's micro-batches are slices of one
// batch, and a layer that writes its input in place must not make the others' saved tensors look
// modified (detach() would share the batch's counter).
at::Tensor as_leaf(const at::Tensor& t, const c10::Device& device, bool track_grad) {
  at::Tensor leaf = t.to(device).variable_data();
  if (track_grad && leaf.is_floating_point()) leaf.requires_grad_(true);
  return leaf;
}

}  // namespace

Stage::Stage(int index, size_t first_layer, LayerSeq layers, c10::Device device)
    : index_(index),
      first_layer_(first_layer),
      layers_(std::move(layers)),
      device_(with_index(device)),
      stream_(stage_stream(device_)) {
  for (size_t i = 0; i < layers_.size(); ++i)
    has_buffers_ = has_buffers_ || !layers_[i].buffers().empty();
  note_randomness();
}

void Stage::note_randomness() {
  stochastic_ = false;
  shared_generator_ = false;
  bool training = false;
  for (size_t i = 0; i < layers_.size(); ++i) {
    stochastic_ = stochastic_ || layers_[i].is_stochastic();
    // On an accelerator every draw comes from the device's shared generator (dropout.h).
    shared_generator_ =
        shared_generator_ ||
        (device_.is_cpu() ? layers_[i].draws_from_shared_generator() : layers_[i].is_stochastic());
    training = training || layers_[i].is_training();
  }
  // What a run found of the layers' own draws holds while their mode does.
  if (training != probed_training_) {
    draws_unrecognised_.reset();
    probed_training_ = training;
  }
  if (draws_unrecognised_.value_or(false)) stochastic_ = shared_generator_ = true;
}

// A layer wrote the stage's (leaf) input in place: run the stage again on copies.
struct InputWrittenInPlace {};

Batch Stage::run_layers(Batch input, int micro_batch) {
  for (size_t i = 0; i < layers_.size(); ++i) {
    try {
      input = layers_[i].forward(std::move(input));
    } catch (const std::exception& error) {
      if (!input_writes_.known && is_in_place_on_leaf(error)) throw InputWrittenInPlace{};
      throw std::runtime_error(fmt::format(
          "stage {}, layer {} ('{}', {}), {} of micro-batch {}: {}", index_, first_layer_ + i,
          layers_[i].name(), layers_[i].type(), action_, micro_batch, error_summary(error)));
    }
  }
  return input;
}

// The micro-batch's input must keep its values: a checkpointed one's recompute runs the layers
// on it again (in_place.h).
Batch Stage::run_seeded(const Batch& input, int micro_batch, uint64_t rng_seed) {
  if (input_writes_.known) {
    return run_seeded_once(input_writes_.writes ? copied_inputs(input) : input, micro_batch,
                           rng_seed);
  }
  if (!at::GradMode::is_enabled()) {
    // Nothing refuses a write here: the first such run goes on copies and looks at them after.
    const Batch copies = copied_inputs(input);
    const std::vector<int64_t> before = tensor_versions(copies);
    Batch output = run_seeded_once(copies, micro_batch, rng_seed);
    // Or learnt by a probe of the generator, which runs on copies of these (run_probing_generator).
    input_writes_ = {true, tensor_versions(copies) != before || input_writes_.writes};
    return output;
  }
  // With grad, autograd refuses a write to an input leaf before it happens; an input that needs
  // no gradient is not run again without a checkpointed (no-grad) forward first.
  BufferSnapshot buffers(layers_, has_buffers_);  // the layers before the refusal run twice
  try {
    Batch output = run_seeded_once(input, micro_batch, rng_seed);
    // Had a layer written one of these, autograd would have refused it.
    if (!input_writes_.known && all_require_grad(input)) input_writes_ = {true, false};
    return output;
  } catch (const InputWrittenInPlace&) {
    input_writes_ = {true, true};  // from now on up front; re-seeded, so the masks are the same
    buffers.restore();
    return run_seeded_once(copied_inputs(input), micro_batch, rng_seed);
  }
}

Batch Stage::run_seeded_once(const Batch& input, int micro_batch, uint64_t rng_seed) {
  if (!shared_generator_ && !draws_unrecognised_ && probed_training_ && device_.is_cpu()) {
    return run_probing_generator(input, micro_batch, rng_seed);
  }
  if (!stochastic_) return run_layers(input, micro_batch);
  const StageGeneratorScope own_generator(rng_seed);
  if (!shared_generator_) return run_layers(input, micro_batch);
  std::lock_guard<std::shared_mutex> lock(default_generator_mutex());
  torch::manual_seed(rng_seed);
  return run_layers(input, micro_batch);
}

// A layer may draw from ATen's generator in a way no layer type tells (a C++ module calling
// torch::randn in its forward). The first run in training mode runs beside other such first
// runs only (no stage seeds the generator meanwhile) and looks whether the generator moved. If
// not, no layer drew. If it did (this stage, or one probing beside it), the stage is taken for one
// that draws from then on and runs again as those do, seeded under the generator's lock, so that
// its recompute draws what this forward drew; its buffers (a batch norm's running statistics) get
// back what the probe changed. The probe runs on copies of the input unless the layers are known
// not to write it (in_place.h), and learns from them whether they do. A stage that draws nothing,
// probed beside one that draws, is so taken for one that does: it then only runs under the lock.
Batch Stage::run_probing_generator(const Batch& input, int micro_batch, uint64_t rng_seed) {
  BufferSnapshot buffers(layers_, has_buffers_);
  // Autograd refuses a write to a leaf that requires grad before it happens: only other inputs
  // need copies (a carried skip's gradient then passes back as the very tensor it came with).
  const bool guarded = at::GradMode::is_enabled() && all_leaves_requiring_grad(input);
  const bool may_write = (!input_writes_.known || input_writes_.writes) && !guarded;
  const Batch probed = may_write ? copied_inputs(input) : input;
  const std::vector<int64_t> versions = tensor_versions(probed);
  Batch output;
  {
    std::shared_lock<std::shared_mutex> probing(default_generator_mutex());
    const at::Tensor before = default_generator_state();  // a probe beside may be drawing
    std::optional<StageGeneratorScope> own_generator;
    if (stochastic_) own_generator.emplace(rng_seed);
    output = run_layers(probed, micro_batch);
    draws_unrecognised_ = !torch::equal(default_generator_state(), before);
  }
  if (may_write && tensor_versions(probed) != versions) input_writes_ = {true, true};
  if (!*draws_unrecognised_) return output;
  stochastic_ = shared_generator_ = true;
  buffers.restore();
  return run_seeded_once(input_writes_.writes ? copied_inputs(input) : input, micro_batch,
                         rng_seed);
}

Batch Stage::forward(int micro_batch, Batch input, const ForwardMode& mode) {
  action_ = "forward";
  MicroBatch& mb = states_[micro_batch];
  mb.rng_seed = mode.rng_seed;
  for (auto& t : input.tensors) t = as_leaf(t, device_, mode.track_input_grad);
  for (auto& [name, t] : input.skips) t = as_leaf(t, device_, mode.track_input_grad);
  mb.input = std::move(input);
  if (mode.checkpointed) {
    torch::NoGradGuard no_grad;
    return run_seeded(mb.input, micro_batch, mode.rng_seed);
  }
  mb.output = run_seeded(mb.input, micro_batch, mode.rng_seed);
  return mb.output;
}

void Stage::recompute(int micro_batch) {
  MicroBatch& mb = state(micro_batch, "recompute");
  action_ = "recompute";
  RecomputeScope scope;
  // It replays a forward whose effects on the model are done: a batch norm's running statistics
  // (of any kind, a TorchScript model's too) must not move a second time.
  BufferSnapshot buffers(layers_, has_buffers_);
  mb.output = run_seeded(mb.input, micro_batch, mb.rng_seed);
  buffers.restore();
}

Stage::MicroBatch& Stage::state(int micro_batch, const char* action) {
  const auto it = states_.find(micro_batch);
  if (it == states_.end()) {
    throw std::logic_error(fmt::format("stage {}: {} of micro-batch {} before its forward", index_,
                                       action, micro_batch));
  }
  return it->second;
}

Batch Stage::input_gradients(const Batch& input) const {
  Batch grads;
  for (const auto& t : input.tensors) {
    grads.tensors.push_back(t.requires_grad() ? t.grad() : at::Tensor());
  }
  for (const auto& [name, t] : input.skips) {
    grads.skips.emplace(name, t.requires_grad() ? t.grad() : at::Tensor());
  }
  return grads;
}

Batch Stage::backward(int micro_batch, Batch output_grad, bool defer_weights) {
  MicroBatch& mb = state(micro_batch, "backward");
  // An output that is one of the stage's input leaves is an input passed on untouched (a skip
  // the stage only carries): its gradient is the one received, sent back as it is. Given to
  // autograd, it would be copied into the leaf's .grad, the stage holding both in its backward.
  const std::vector<at::Tensor> inputs = mb.input.tensors;  // handles: run_backward drops mb
  const std::map<std::string, at::Tensor> input_skips = mb.input.skips;
  const auto is_input = [&](const at::Tensor& t) {
    const auto same = [&t](const at::Tensor& leaf) { return leaf.is_same(t); };
    return std::any_of(inputs.begin(), inputs.end(), same) ||
           std::any_of(input_skips.begin(), input_skips.end(),
                       [&](const auto& skip) { return same(skip.second); });
  };
  std::map<const c10::TensorImpl*, at::Tensor> passed;  // received gradient by input leaf
  std::vector<at::Tensor> outputs, grads;
  auto add = [&](const at::Tensor& out, const at::Tensor& grad) {
    if (!out.defined() || !out.requires_grad() || !grad.defined()) return;
    at::Tensor moved = grad.to(out.device());
    if (is_input(out)) {  // passed on twice: both gradients
      at::Tensor& sum = passed[out.unsafeGetTensorImpl()];
      sum = sum.defined() ? sum + moved : moved;
      return;
    }
    outputs.push_back(out);
    grads.push_back(std::move(moved));
  };
  for (size_t i = 0; i < mb.output.tensors.size() && i < output_grad.tensors.size(); ++i) {
    add(mb.output.tensors[i], output_grad.tensors[i]);
  }
  for (const auto& [name, grad] : output_grad.skips) {
    const auto it = mb.output.skips.find(name);
    if (it != mb.output.skips.end()) add(it->second, grad);
  }
  output_grad = Batch();  // autograd alone holds them now (handed_backward.h)
  Batch input_grads =
      run_backward(micro_batch, std::move(outputs), std::move(grads), defer_weights);
  if (passed.empty()) return input_grads;
  // The input may also have been used inside the stage: then both parts make its gradient.
  const auto combine = [&passed](const at::Tensor& leaf, at::Tensor& grad) {
    const auto it = passed.find(leaf.unsafeGetTensorImpl());
    if (it != passed.end()) grad = grad.defined() ? grad + it->second : it->second;
  };
  for (size_t i = 0; i < inputs.size() && i < input_grads.tensors.size(); ++i) {
    if (inputs[i].defined()) combine(inputs[i], input_grads.tensors[i]);
  }
  for (auto& [name, grad] : input_grads.skips) {
    const auto it = input_skips.find(name);
    if (it != input_skips.end() && it->second.defined()) combine(it->second, grad);
  }
  return input_grads;
}

Batch Stage::run_backward(int micro_batch, std::vector<at::Tensor> roots,
                          std::vector<at::Tensor> grads, bool defer_weights) {
  MicroBatch& mb = state(micro_batch, "backward");
  // The outputs go once the backward is done with them, as inside the stage (handed_backward.h).
  mb.output = Batch();
  Batch input_grads;
  try {
    if (!defer_weights) {
      handed_backward(std::move(roots), std::move(grads));
      input_grads = input_gradients(mb.input);
      states_.erase(micro_batch);
      return input_grads;
    }
    std::vector<at::Tensor> inputs = mb.input.tensors;
    for (const auto& [name, t] : mb.input.skips) inputs.push_back(t);
    mb.split.emplace(std::move(roots), std::move(grads), inputs, layers_.parameters());
    const std::vector<at::Tensor>& computed = mb.split->input_grads();
    size_t k = 0;
    for (; k < mb.input.tensors.size(); ++k) input_grads.tensors.push_back(computed[k]);
    for (const auto& [name, t] : mb.input.skips) input_grads.skips.emplace(name, computed[k++]);
  } catch (const std::exception& error) {
    throw std::runtime_error(fmt::format("stage {}, backward of micro-batch {}: {}", index_,
                                         micro_batch, error_summary(error)));
  }
  return input_grads;
}

void Stage::weight(int micro_batch) {
  MicroBatch& mb = state(micro_batch, "weight gradients");
  try {
    if (mb.split) mb.split->run_weight();
  } catch (const std::exception& error) {
    throw std::runtime_error(fmt::format("stage {}, weight gradients of micro-batch {}: {}", index_,
                                         micro_batch, error_summary(error)));
  }
  states_.erase(micro_batch);
}

Batch Stage::backward_from_loss(int micro_batch, const at::Tensor& target, const LossFn& loss_fn,
                                double weight, double* loss, bool defer_weights) {
  MicroBatch& mb = state(micro_batch, "backward");
  at::Tensor weighted;
  try {
    weighted = loss_fn(mb.output.value(), target.to(device_));
    // A micro-batch with no terms of the mini-batch's loss (every class id ignored): its mean of
    // nothing is NaN, and it adds nothing, gradients included (zero whatever the output holds;
    // its value may be NaN, so 0 is what it adds to the step's loss).
    const bool adds_nothing = weight == 0 && weighted.numel() == 1;
    weighted = adds_nothing ? mb.output.value().sum() * 0.0 : weighted * weight;
    if (weighted.numel() != 1) {
      throw std::invalid_argument(
          fmt::format("the loss function returned {} values (shape {}), not one (a loss with "
                      "reduction 'none'?)",
                      weighted.numel(), c10::str(weighted.sizes())));
    }
    if (loss != nullptr) *loss = adds_nothing ? 0.0 : weighted.item<double>();
  } catch (const std::exception& error) {
    throw std::runtime_error(fmt::format("stage {}, loss of micro-batch {}: {}", index_,
                                         micro_batch, error_summary(error)));
  }
  if (!weighted.requires_grad()) return run_backward(micro_batch, {}, {}, defer_weights);
  at::Tensor seed = at::ones_like(weighted);
  return run_backward(micro_batch, {std::move(weighted)}, {std::move(seed)}, defer_weights);
}

Batch Stage::infer(int micro_batch, Batch input) {
  action_ = "forward";
  input = input.to(device_);
  return run_layers(std::move(input), micro_batch);
}

}  // namespace pipebal::pipeline
