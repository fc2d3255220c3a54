// The profiler: turns a layer sequence and a sample batch into per-layer forward and backward
// times and memory, measured layer by layer on real inputs. What the balancer reads.
//
//   profiler::ProfileOptions options;
//   options.repeat = 20;
//   const profiler::Profile profile = profiler::profile_model(model.layers, sample, options);
//   profiler::write_profile("profile.json", profile);
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "pipebal/balance/layer_cost.h"
#include "pipebal/pipeline/batch.h"
#include "pipebal/pipeline/layer_seq.h"
#include "pipebal/profiler/environment.h"
#include "pipebal/profiler/timer.h"

namespace pipebal::profiler {

struct ProfileOptions {
  TimerBackend backend = TimerBackend::kAuto;
  int warmup = 2;   // untimed passes (and per-layer runs) before the measured ones
  int repeat = 10;  // measured forward+backward passes over the model; each times every layer
  // When > 0, timing also stops once the measured passes have taken time_budget_s seconds (at
  // least one pass is always measured). 0: no budget.
  double time_budget_s = 0;
  c10::Device device = c10::Device(c10::kCPU);
  // Floating-point parameters, buffers and sample tensors are converted to it; unset: as given.
  std::optional<c10::ScalarType> dtype;
  // Threads that train clones of the model alongside the profiled layers (co_runner.h), so that
  // layers are timed with the cores as busy as the other pipeline stages will keep them; on a
  // CPU, typically stages - 1. Memory is measured while they pause. CPU only.
  int co_runners = 0;
  // With stages pinned to cores (common/thread_pinning.h): each device's CPUs, the profiled one's
  // first. The calling thread is pinned to the first for the profile (call from a thread whose
  // intra-op pool is yet to start, which then inherits them), co-runner i to device i + 1's (one
  // with no list left: the first's), and the engine's calibration pipelines' stages to the first
  // two. Empty: the scheduler places them all.
  std::vector<std::vector<int>> device_cpus;
  // The training loss of the model's output (against the sample's target), as the pipeline's
  // last stage computes it per micro-batch inside its backward action. When set, the last
  // layer's backward time and backward peak include the loss and its gradient; unset, the
  // backward starts from a gradient of ones.
  std::function<at::Tensor(const at::Tensor& output)> loss;
  // Also measure what the engine adds per step and per action (engine_overhead.h). CPU only.
  bool measure_engine = true;
  // What to take off each layer's timed backward (and B) for the autograd run of its own it
  // took, where a stage takes one over all its layers (autograd_run_cost.h); unset: measured on
  // the CPU, nothing elsewhere. 0 keeps the times as measured.
  std::optional<double> autograd_run_ms;
};

struct LayerProfile {
  int64_t index = 0;
  std::string name;
  std::string type;
  // Medians over the measured repetitions, with the 10th and 90th percentiles and the samples.
  double forward_ms = 0;
  double backward_ms = 0;
  double forward_p10_ms = 0;
  double forward_p90_ms = 0;
  double backward_p10_ms = 0;
  double backward_p90_ms = 0;
  std::vector<double> forward_samples_ms;
  std::vector<double> backward_samples_ms;
  // W alone when the backward is split into B and W (zb-h1; pipeline/split_backward.h): the
  // parameters' gradients from the kept output-side gradients, median of its own passes.
  double weight_ms = 0;
  std::vector<double> weight_samples_ms;
  // B alone in those passes: the input's gradient with W deferred (with the loss on the model's
  // last layer, as backward_ms). B + W can exceed backward_ms: autograd runs the layer twice and
  // W reads what B kept again.
  double input_grad_ms = 0;
  std::vector<double> input_grad_samples_ms;
  // Bytes of the gradients B keeps for W (held from B to W under zb-h1).
  int64_t kept_grad_bytes = 0;
  // Bytes a micro-batch still holds after B, until its W: the output, what W needs of the
  // saved activations (B frees the rest) and the kept gradients.
  int64_t weight_held_bytes = 0;
  // Of weight_held_bytes, the output's blocks that nothing of the layer's graph keeps: a stage
  // ending at this layer, which sent its output and dropped it, holds none of them from B to W
  // (an inner layer's output, the next layer's input, stays counted, as in activation_bytes).
  int64_t released_output_bytes = 0;
  // The most W allocates above what it starts from (the held bytes, the parameters' gradients
  // already there): each parameter's new gradient before it is added to the held one, and any
  // workspace.
  int64_t weight_peak_bytes = 0;
  int64_t param_bytes = 0;   // parameters only
  int64_t buffer_bytes = 0;  // buffers (batch-norm running statistics, ...)
  // Bytes the forward left allocated while its output is held: what autograd saved for the
  // backward plus the output itself (the next layer's input, not counted again there).
  int64_t activation_bytes = 0;
  // Bytes of the input tensors and skip tensors it gets: what a stage starting at this layer
  // takes (the previous layer's output_bytes; for the first layer, a micro-batch of the input).
  int64_t input_bytes = 0;
  // Bytes of the gradients a backward sends for that input: one per floating tensor, so a
  // tensor given twice (as the main input and as a skip) counts twice, unlike input_bytes.
  int64_t input_grad_bytes = 0;
  // Bytes of the outputs that are inputs passed on untouched (skips the layer only carries):
  // their gradients are alive while its backward runs, unseen by backward_peak_bytes.
  int64_t carried_bytes = 0;
  // Bytes of the output tensors and the skip tensors live after this layer: what crosses a
  // stage boundary placed after it.
  int64_t output_bytes = 0;
  // Highest allocation during forward and backward together, relative to just before them.
  int64_t peak_bytes = 0;
  // Highest allocation during the backward alone, relative to its start (the forward's
  // activations and output still held): the incoming gradient, the input's and the parameters'
  // gradients and any workspace, less what the backward frees on its way.
  int64_t backward_peak_bytes = 0;
  std::vector<std::vector<int64_t>> output_shapes;  // main tensors, for reports
};

struct Profile {
  std::string model;
  std::string device;      // "cpu", "cuda:0"
  std::string backend;     // the resolved backend: wallclock, events or cupti
  std::string dtype;       // of the sample's first floating tensor, after conversion; "" if none
  int64_t batch_size = 0;  // the (micro-)batch size measured
  std::vector<std::vector<int64_t>> input_shapes;  // the measured (micro-)batch's
  // What the profile plans for: the mini-batch's input shape (batch first, as --input-shape
  // takes it) cut into `chunks` micro-batches of batch_size samples. Set by the caller that
  // chose the micro-batch size; 0 and empty when not said.
  int chunks = 0;
  std::vector<int64_t> input_shape;
  // The mini-batch's forward arguments as `--input` specs ("int64[32,64]:1000"), when known.
  std::vector<std::string> inputs;
  Environment environment;
  std::vector<LayerProfile> layers;
  // The same layers profiled at several micro-batch sizes (`pipebal profile --chunks 1,2,4,8`),
  // ascending by size, this profile's own (`layers`) among them; empty when only one was.
  struct Size {
    int chunks = 0;
    int64_t micro_batch_size = 0;
    std::vector<LayerProfile> layers;
  };
  std::vector<Size> sizes;
  // Sizes asked for but not measured: the cost per sample was already linear around them
  // (workflow::profile_at_sizes), so the cost model interpolates them from the sizes beside.
  std::vector<int64_t> skipped_sizes;
  // The engine's own costs on this device and thread count (ProfileOptions::measure_engine).
  std::optional<balance::EngineCost> engine;
};

// Where a profile stands, reported as it goes: first each layer on its own (warm-up and memory),
// then whole warm-up passes, then the timed passes.
struct ProfileProgress {
  enum class Phase { kLayers, kWarmupPasses, kTimedPasses };
  Phase phase = Phase::kLayers;
  size_t done = 0;    // layers or passes finished in this phase
  size_t total = 0;   // in this phase (timed passes: at most; a time budget may end them early)
  std::string layer;  // kLayers: the layer just measured
};
using ProgressFn = std::function<void(const ProfileProgress& progress)>;

// Profiles every layer of `model` in order. Layer i gets layer i-1's real output (and the skip
// tensors live at that point) as detached leaves, requiring grad when floating (layer 0's do
// not, as in the pipeline's first stage); its forward and its backward (autograd from its
// output with a gradient of ones; the last layer's from ProfileOptions::loss when it is set)
// are timed separately; memory is measured on one extra
// repetition between warm-up and the measured ones. Runs on clones in training mode: `model`,
// its parameters, buffers and gradients are untouched. Then, on a CPU, the engine's own costs.
//
// Throws std::invalid_argument for bad options, an empty model or batch, and a layer that
// fails (naming its index, name, type and the shapes it got); std::runtime_error when a timer
// or memory meter cannot be set up.
Profile profile_model(const pipeline::LayerSeq& model, const pipeline::Batch& sample,
                      const ProfileOptions& options, const ProgressFn& progress = {});

}  // namespace pipebal::profiler
