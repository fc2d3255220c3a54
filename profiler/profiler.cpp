// See profiler.h.
#include "pipebal/profiler/profiler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/autograd.h>

#include "pipebal/common/machine_load.h"
#include "pipebal/common/thread_pinning.h"
#include "pipebal/common/time_limit.h"
#include "pipebal/pipeline/error_text.h"
#include "pipebal/pipeline/handed_backward.h"
#include "pipebal/pipeline/in_place.h"
#include "pipebal/pipeline/pipeline.h"
#include "pipebal/pipeline/split_backward.h"
#include "pipebal/profiler/autograd_run_cost.h"
#include "pipebal/profiler/co_runner.h"
#include "pipebal/profiler/device.h"
#include "pipebal/profiler/engine_overhead.h"
#include "pipebal/profiler/keep_default_generator.h"
#include "pipebal/profiler/memory_meter.h"
#include "pipebal/profiler/pass_timer.h"
#include "pipebal/profiler/profile_merge.h"
#include "pipebal/profiler/statistics.h"
#include "pipebal/profiler/tensor_references.h"

namespace pipebal::profiler {
namespace {

using pipeline::Batch;
using pipeline::error_summary;
using pipeline::Layer;

// The floating dtype every floating tensor of `tensors` has; empty when none has one, or they
// differ.
std::string common_float_dtype(const std::vector<at::Tensor>& tensors) {
  std::set<c10::ScalarType> dtypes;
  for (const at::Tensor& t : tensors) {
    if (t.defined() && t.is_floating_point()) dtypes.insert(t.scalar_type());
  }
  return dtypes.size() == 1 ? dtype_name(*dtypes.begin()) : std::string();
}

std::vector<int64_t> shape_of(const at::Tensor& t) {
  return t.defined() ? t.sizes().vec() : std::vector<int64_t>{};
}

// "[4, 8]" or "[4, 16, 32, 32] + skips {skip0: [4, 16, 64, 64]}".
std::string describe(const Batch& batch) {
  std::vector<std::string> tensors;
  for (const at::Tensor& t : batch.tensors)
    tensors.push_back(fmt::format("[{}]", fmt::join(shape_of(t), ", ")));
  std::string text = fmt::format("{}", fmt::join(tensors, " "));
  if (!batch.skips.empty()) {
    std::vector<std::string> skips;
    for (const auto& [name, t] : batch.skips) {
      skips.push_back(fmt::format("{}: [{}]", name, fmt::join(shape_of(t), ", ")));
    }
    text += fmt::format(" + skips {{{}}}", fmt::join(skips, ", "));
  }
  return text;
}

int64_t tensor_bytes(const at::Tensor& t) {
  return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0;
}

int64_t sum_bytes(const std::vector<at::Tensor>& tensors) {
  int64_t bytes = 0;
  for (const at::Tensor& t : tensors) bytes += tensor_bytes(t);
  return bytes;
}

// Every distinct tensor of the batch, skip tensors included, counted once even when a skip
// tensor is the output itself.
int64_t batch_bytes(const Batch& batch) {
  std::set<std::pair<const void*, int64_t>> seen;
  int64_t bytes = 0;
  auto add = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    if (seen.insert({t.data_ptr(), t.numel()}).second) bytes += tensor_bytes(t);
  };
  for (const at::Tensor& t : batch.tensors) add(t);
  for (const auto& [name, t] : batch.skips) add(t);
  return bytes;
}

// Bytes of the gradients of `tensors`: each floating one's own, shared storage or not.
int64_t gradient_bytes(const std::vector<at::Tensor>& tensors) {
  int64_t bytes = 0;
  for (const at::Tensor& t : tensors) {
    if (t.defined() && t.is_floating_point()) bytes += tensor_bytes(t);
  }
  return bytes;
}

// The sample on the profiling device and dtype, copied so that no layer can modify the
// caller's tensors in place.
Batch prepare_sample(const Batch& sample, const ProfileOptions& options) {
  auto convert = [&](const at::Tensor& t) {
    if (!t.defined()) return t;
    at::Tensor moved = t.detach().to(options.device);
    if (options.dtype && moved.is_floating_point()) moved = moved.to(*options.dtype);
    return moved.clone();
  };
  Batch prepared;
  for (const at::Tensor& t : sample.tensors) prepared.tensors.push_back(convert(t));
  for (const auto& [name, t] : sample.skips) prepared.skips.emplace(name, convert(t));
  return prepared;
}

void clear_grads(const std::vector<at::Tensor>& tensors) {
  for (at::Tensor t : tensors) {  // a handle: resetting its grad resets the shared tensor's
    if (t.defined() && t.grad().defined()) t.mutable_grad() = at::Tensor();
  }
}

std::vector<at::Tensor> leaves_of(const Batch& batch) {
  std::vector<at::Tensor> all = batch.tensors;
  for (const auto& [name, t] : batch.skips) all.push_back(t);
  return all;
}

// The tensors this layer computed that a backward can start from: outputs passed through
// untouched (leaves, e.g. skip tensors only carried along) have nothing to differentiate.
std::vector<at::Tensor> differentiable_outputs(const Batch& output) {
  std::vector<at::Tensor> outs;
  auto add = [&](const at::Tensor& t) {
    if (t.defined() && t.requires_grad() && t.grad_fn()) outs.push_back(t);
  };
  for (const at::Tensor& t : output.tensors) add(t);
  for (const auto& [name, t] : output.skips) add(t);
  return outs;
}

std::vector<at::Tensor> seed_gradients(const std::vector<at::Tensor>& outputs) {
  std::vector<at::Tensor> seeds;
  seeds.reserve(outputs.size());
  for (const at::Tensor& t : outputs) seeds.push_back(at::ones_like(t));
  return seeds;
}

// Bytes of the blocks `output` views that nothing else refers to: once the output is sent and
// dropped, they go (LayerProfile::released_output_bytes). Tensors passed through from the input
// are the input's too, and stay.
int64_t released_bytes(const Batch& output) {
  std::map<const c10::StorageImpl*, std::vector<const at::Tensor*>> blocks;
  const auto note = [&blocks](const at::Tensor& t) {
    if (t.defined() && t.has_storage() && t.storage().data() != nullptr) {
      blocks[t.storage().unsafeGetStorageImpl()].push_back(&t);
    }
  };
  for (const at::Tensor& t : output.tensors) note(t);
  for (const auto& [name, t] : output.skips) note(t);
  int64_t bytes = 0;
  for (const auto& [block, uses] : blocks) {
    if (only_these_refer_to_their_block(uses)) {
      bytes += static_cast<int64_t>(uses.front()->storage().nbytes());
    }
  }
  return bytes;
}

// Runs one layer on a fixed input: warm-up and the memory measurement. With a loss (the model's
// last layer), the backward starts from it, as the last stage's does.
class LayerRunner {
 public:
  LayerRunner(Layer& layer, size_t index, Batch input, LossFn loss)
      : layer_(layer), index_(index), input_(std::move(input)), loss_(std::move(loss)) {
    params_ = layer_.parameters();
    leaves_ = leaves_of(input_);
  }

  // Bytes of `output`'s floating tensors that are the input's own, passed on untouched.
  int64_t carried_bytes(const Batch& output) const {
    std::vector<at::Tensor> carried;
    for (const at::Tensor& t : leaves_of(output)) {
      const auto same = [&t](const at::Tensor& leaf) { return leaf.is_same(t); };
      if (t.defined() && std::any_of(leaves_.begin(), leaves_.end(), same)) carried.push_back(t);
    }
    return gradient_bytes(carried);
  }

  // One untimed forward and backward (warm-up before the memory measurement).
  void run() {
    reset_grads();
    backward_from(forward());
  }

  // The memory measurements, under the meter. Returns the layer's output, which the next layer
  // is measured on.
  Batch measure(MemoryMeter& meter, LayerProfile& profile) {
    reset_grads();
    // As on a stage after its first micro-batch, the parameters' gradients are there: the
    // backward makes each new one, adds it to the held one and frees it, a node at a time.
    give_param_grads();
    const int64_t base_bytes = meter.current_bytes();
    meter.reset_peak();
    Batch output = forward();
    const int64_t forward_end_bytes = meter.current_bytes();
    const int64_t forward_peak_bytes = meter.peak_bytes();
    profile.activation_bytes = std::max<int64_t>(0, forward_end_bytes - base_bytes);
    // The backward's own peak: what it adds above the activations it starts from, which the
    // forward's transients (freed before it) do not inflate; the loss's too on the last layer.
    meter.reset_peak();
    backward_from(std::move(output));
    const int64_t backward_peak_bytes = meter.peak_bytes();
    profile.backward_peak_bytes = std::max<int64_t>(0, backward_peak_bytes - forward_end_bytes);
    profile.peak_bytes =
        std::max<int64_t>(0, std::max(forward_peak_bytes, backward_peak_bytes) - base_bytes);
    return measure_weight(meter, profile);
  }

 private:
  void reset_grads() {
    clear_grads(params_);
    clear_grads(leaves_);
  }

  void give_param_grads() {
    for (const at::Tensor& param : params_) {
      if (param.requires_grad() && !param.grad().defined()) {
        param.mutable_grad() = at::zeros_like(param);
      }
    }
  }

  // A forward and a B under the meter: what stays allocated until W, besides the input's
  // gradient (sent on). The output's gradient is handed to B, as in a stage: it stays only where
  // B keeps it for W (a parameter's node right at the output). Then W, with the parameters'
  // gradients already there as on a stage after its first micro-batch: what it adds on top.
  // Returns the forward's output.
  Batch measure_weight(MemoryMeter& meter, LayerProfile& profile) {
    reset_grads();
    const int64_t base_bytes = meter.current_bytes();
    Batch output = forward();
    std::vector<at::Tensor> outs = differentiable_outputs(output);
    profile.weight_held_bytes = std::max<int64_t>(0, meter.current_bytes() - base_bytes);
    profile.released_output_bytes = 0;
    profile.weight_peak_bytes = 0;
    if (outs.empty()) return output;
    std::vector<at::Tensor> seeds = seed_gradients(outs);
    try {
      pipeline::SplitBackward split(std::move(outs), std::move(seeds), leaves_, params_);
      int64_t sent_bytes = 0;
      for (const at::Tensor& grad : split.input_grads()) {
        if (grad.defined()) sent_bytes += static_cast<int64_t>(grad.nbytes());
      }
      const int64_t held = meter.current_bytes() - base_bytes - sent_bytes;
      profile.weight_held_bytes = std::max<int64_t>(0, held);
      profile.released_output_bytes = std::min(profile.weight_held_bytes, released_bytes(output));
      give_param_grads();
      const int64_t weight_start_bytes = meter.current_bytes();
      meter.reset_peak();
      split.run_weight();
      profile.weight_peak_bytes = std::max<int64_t>(0, meter.peak_bytes() - weight_start_bytes);
    } catch (const std::exception& error) {
      throw std::invalid_argument(
          fmt::format("layer {} ('{}', {}): backward failed on input {}: {}", index_, layer_.name(),
                      layer_.type(), describe(input_), error_summary(error)));
    }
    return output;
  }

  Batch forward() {
    try {
      // A shallow copy: the layer may pop skips from it.
      return pipeline::forward_keeping_input(layer_, input_, input_writes_);
    } catch (const std::exception& error) {
      throw std::invalid_argument(fmt::format("layer {} ('{}', {}) failed on input {}: {}", index_,
                                              layer_.name(), layer_.type(), describe(input_),
                                              error_summary(error)));
    }
  }

  // From the loss of the output when there is one, else from gradients of ones at every
  // differentiable output. As inside a stage, the output and its gradient go as soon as the
  // backward is done with them (pipeline::handed_backward).
  void backward_from(Batch output) {
    if (loss_) {
      at::Tensor loss;
      try {
        loss = loss_(output.value());
      } catch (const std::exception& error) {
        throw std::invalid_argument(
            fmt::format("the loss of layer {} ('{}', {})'s output failed: {}", index_,
                        layer_.name(), layer_.type(), error_summary(error)));
      }
      output = Batch();
      if (loss.requires_grad()) backward({loss}, {at::ones_like(loss)});
      return;
    }
    std::vector<at::Tensor> outs = differentiable_outputs(output);
    output = Batch();
    if (outs.empty()) return;
    std::vector<at::Tensor> seeds = seed_gradients(outs);
    backward(std::move(outs), std::move(seeds));
  }

  void backward(std::vector<at::Tensor> outs, std::vector<at::Tensor> seeds) {
    try {
      pipeline::handed_backward(std::move(outs), std::move(seeds));
    } catch (const std::exception& error) {
      throw std::invalid_argument(
          fmt::format("layer {} ('{}', {}): backward failed on input {}: {}", index_, layer_.name(),
                      layer_.type(), describe(input_), error_summary(error)));
    }
  }

  Layer& layer_;
  size_t index_;
  Batch input_;
  LossFn loss_;
  pipeline::InputWrites input_writes_;  // in_place.h
  std::vector<at::Tensor> params_;
  std::vector<at::Tensor> leaves_;
};

void check_options(const ProfileOptions& options) {
  if (options.warmup < 0) {
    throw std::invalid_argument(fmt::format("warmup must be >= 0, got {}", options.warmup));
  }
  if (options.repeat < 1) {
    throw std::invalid_argument(fmt::format("repeat must be >= 1, got {}", options.repeat));
  }
  // One per other stage at most, each a thread training its own copy of the model.
  if (options.co_runners < 0 || options.co_runners > pipeline::kMaxStages - 1) {
    throw std::invalid_argument(fmt::format("co-runners must be from 0 to {}, got {}",
                                            pipeline::kMaxStages - 1, options.co_runners));
  }
  if (options.co_runners > 0 && !options.device.is_cpu()) {
    throw std::invalid_argument("co-runners load the CPU cores: they apply to --device cpu only");
  }
  check_time_limit(options.time_budget_s, "the time budget", "none");
  if (options.autograd_run_ms &&
      !(std::isfinite(*options.autograd_run_ms) && *options.autograd_run_ms >= 0)) {
    throw std::invalid_argument(fmt::format(
        "the autograd run's cost must be finite and >= 0, got {}", *options.autograd_run_ms));
  }
}

Batch detached(const Batch& batch) {
  return as_leaves(batch, /*requires_grad=*/false);
}

}  // namespace

Profile profile_model(const pipeline::LayerSeq& model, const pipeline::Batch& sample,
                      const ProfileOptions& options, const ProgressFn& progress) {
  check_options(options);
  if (model.empty()) throw std::invalid_argument("cannot profile a model without layers");
  if (sample.tensors.empty()) throw std::invalid_argument("cannot profile on an empty batch");
  const TimerBackend backend = resolve_timer_backend(options.backend, options.device);
  // A model's dropout draws from the default CPU generator: a caller's seeded stream goes on
  // after the profile as if there had been none (a CUDA device's generator is not kept).
  const KeepDefaultGenerator keep;
  const MachineLoadMeter load;
  std::optional<ThreadPin> pinned;
  if (!options.device_cpus.empty()) pinned.emplace(options.device_cpus.front());

  // Clones, so that the caller's model keeps its values, buffers, gradients and mode.
  pipeline::LayerSeq layers = model.clone();
  layers.train(true);
  layers.to(options.device);
  if (options.dtype) layers.to(*options.dtype);
  Batch current = prepare_sample(sample, options);

  Profile profile;
  profile.model = model.name();
  profile.device = options.device.str();
  profile.backend = to_string(backend);
  for (const at::Tensor& t : current.tensors) {
    profile.input_shapes.push_back(shape_of(t));
    if (profile.dtype.empty() && t.defined() && t.is_floating_point()) {
      profile.dtype = dtype_name(t.scalar_type());
    }
  }
  if (profile.dtype.empty() && options.dtype) profile.dtype = dtype_name(*options.dtype);
  // No floating input (token ids): the dtype the parameters and buffers hold, when they hold
  // one, so that a plan of this profile still trains, and refuses to train, in the dtype it was
  // measured in (train --plan converts both to it: with several, it would change the model).
  if (profile.dtype.empty()) {
    std::vector<at::Tensor> tensors = layers.parameters();
    for (const at::Tensor& buffer : layers.buffers()) tensors.push_back(buffer);
    profile.dtype = common_float_dtype(tensors);
  }
  profile.batch_size = current.size();
  profile.environment = capture_environment(options.device);
  profile.environment.warmup = options.warmup;
  profile.environment.repeat = options.repeat;
  profile.environment.time_budget_s = options.time_budget_s;

  auto report = [&progress](ProfileProgress::Phase phase, size_t done, size_t total,
                            const std::string& layer) {
    if (progress) progress({phase, done, total, layer});
  };
  const std::unique_ptr<LayerTimer> timer = make_layer_timer(backend, options.device);
  std::unique_ptr<MemoryMeter> meter = make_memory_meter(options.device);
  std::unique_ptr<CoRunners> co_runners;
  if (options.co_runners > 0) {
    std::vector<std::vector<int>> co_runner_cpus;
    for (int i = 0; i < options.co_runners && !options.device_cpus.empty(); ++i) {
      const size_t device = static_cast<size_t>(i) + 1;
      co_runner_cpus.push_back(device < options.device_cpus.size() ? options.device_cpus[device]
                                                                   : options.device_cpus.front());
    }
    co_runners = std::make_unique<CoRunners>(layers, current, options.co_runners,
                                             at::get_num_threads(), co_runner_cpus);
  }

  for (size_t i = 0; i < layers.size(); ++i) {
    Layer& layer = layers[i];
    LayerProfile lp;
    lp.index = static_cast<int64_t>(i);
    lp.name = layer.name();
    lp.type = layer.type();
    lp.param_bytes = sum_bytes(layer.parameters());
    lp.buffer_bytes = sum_bytes(layer.buffers());
    lp.input_bytes = batch_bytes(current);
    lp.input_grad_bytes = gradient_bytes(leaves_of(current));

    // As in the pipeline's first stage, the model input needs no gradient.
    LayerRunner runner(layer, i, as_leaves(current, /*requires_grad=*/i > 0),
                       i + 1 == layers.size() ? options.loss : LossFn());
    for (int w = 0; w < options.warmup; ++w) runner.run();
    // Memory on its own repetition: the timed ones then run without the meter's reads.
    if (co_runners) co_runners->pause();
    Batch output = runner.measure(*meter, lp);
    if (co_runners) co_runners->resume();

    lp.output_bytes = batch_bytes(output);
    lp.carried_bytes = runner.carried_bytes(output);
    for (const at::Tensor& t : output.tensors) lp.output_shapes.push_back(shape_of(t));
    current = detached(output);
    profile.layers.push_back(std::move(lp));
    report(ProfileProgress::Phase::kLayers, i + 1, layers.size(), layer.name());
  }

  // Timing runs without the memory meter: on the CPU it puts a bookkeeping step into every
  // allocation, which the co-runners and the timed pass would contend for.
  meter.reset();

  // Timing, in whole passes over the model (see PassTimer). The first layer failing on its
  // input was reported above, with its name, by the per-layer memory measurement.
  PassTimer passes(layers, prepare_sample(sample, options), options.loss);
  for (int w = 0; w < options.warmup; ++w) {
    passes.run(nullptr, nullptr);
    report(ProfileProgress::Phase::kWarmupPasses, w + 1, options.warmup, "");
  }
  profile.environment.autograd_run_ms = options.autograd_run_ms;
  if (!options.autograd_run_ms && options.device.is_cpu()) {
    profile.environment.autograd_run_ms = measure_autograd_run_ms();
  }
  passes.set_autograd_run_ms(profile.environment.autograd_run_ms.value_or(0.0));
  // B's and W's own times (zb-h1 splits the backward) in half as many passes again, one after
  // every second whole-backward pass: a machine whose speed drifts moves both alike.
  const auto start = std::chrono::steady_clock::now();
  int split_passes = 0;
  for (int r = 0; r < options.repeat; ++r) {
    passes.run(timer.get(), &profile.layers);
    if (r % 2 == 1) {
      passes.run(timer.get(), &profile.layers, /*split=*/true);
      ++split_passes;
    }
    report(ProfileProgress::Phase::kTimedPasses, r + 1, options.repeat, "");
    const double spent_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (options.time_budget_s > 0 && spent_s >= options.time_budget_s) break;
  }
  if (split_passes == 0) passes.run(timer.get(), &profile.layers, /*split=*/true);
  summarise_passes(profile.layers);
  if (options.measure_engine && options.device.is_cpu()) {
    profile.engine = measure_engine_cost(std::max(20, options.repeat),
                                         profile.environment.autograd_run_ms, options.device_cpus);
  }
  profile.environment.machine_load = load.load();
  return profile;
}

}  // namespace pipebal::profiler
