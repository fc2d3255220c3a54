// What the balancer knows about a model: one LayerCost per layer, measured per micro-batch (the
// profiler runs at the micro-batch size). Nothing else about the model is needed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipebal/balance/link_model.h"
#include "pipebal/common/machine_load.h"
#include "pipebal/pipeline/schedule.h"

namespace pipebal::balance {

struct LayerCost {
  std::string name;
  std::string type;
  double forward_ms = 0;         // one micro-batch's forward on a speed-1 device
  double backward_ms = 0;        // its backward (without recomputation)
  int64_t param_bytes = 0;       // parameters (a profile's buffer_bytes are not counted)
  int64_t activation_bytes = 0;  // what autograd saves for backward, per micro-batch
  int64_t output_bytes = 0;      // the layer's output, sent to the next stage when cut here
  // What a stage starting at this layer takes and holds per micro-batch: the previous layer's
  // output, for the first layer a micro-batch of the model's input (copied to an accelerator; a
  // CPU profile reads as 0 there: on the CPU the first stage takes views of the caller's batch).
  // -1: not measured, taken as the previous layer's output_bytes (0 for the first layer).
  int64_t input_bytes = -1;
  // The gradients of that input, which a stage starting here sends back: one per floating
  // tensor, so a tensor taken twice (as the main input and as a skip) counts twice. -1: not
  // measured, taken as input_bytes.
  int64_t input_grad_bytes = -1;
  // Of the layer's output, the tensors it passed on untouched (skips it only carries): their
  // gradients are alive while its backward runs (made by the layer that takes them, kept for the
  // one that made them), which its measured peak does not include.
  int64_t carried_bytes = 0;
  // Of backward_ms, what W takes when a schedule splits the backward (zb-h1): the parameters'
  // gradients from the layer's output gradient. 0 when not measured: W is then empty and B, the
  // input gradient, the whole backward.
  double weight_ms = 0;
  // B alone when the backward is split: the input's gradient, W deferred. B + W can exceed
  // backward_ms (autograd runs the layer twice, W reads what B kept again). -1: not measured,
  // taken as backward_ms - weight_ms.
  double input_grad_ms = -1;
  // Bytes of the gradients that B keeps for W, held from B to W when the backward is split.
  int64_t kept_grad_bytes = 0;
  // All a micro-batch holds from B to W when the backward is split: what W needs of the
  // activations, the output, the kept gradients. -1: not measured, taken as activation_bytes +
  // kept_grad_bytes.
  int64_t weight_held_bytes = -1;
  // Of weight_held_bytes, the output that nothing of the layer's graph keeps for W: a stage
  // ending at this layer sends its output and holds none of it from B to W. 0 when not measured.
  int64_t released_output_bytes = 0;
  // The most a W allocates above what it starts from: the parameters' new gradients before they
  // are added to the held ones, and any workspace. 0 when not measured (none counted).
  int64_t weight_peak_bytes = 0;
  // The most the layer's forward and backward together allocate above what was allocated
  // before them: its activations and output, its parameters' gradients, the gradients flowing
  // through it and any workspace. 0: not measured (nothing beyond the activations is counted).
  int64_t peak_bytes = 0;
  // The most the backward alone allocates above what it starts from (the forward's activations
  // and output): the incoming and outgoing gradients, the parameters' gradients and any
  // workspace, less what it frees on its way. -1: not measured, peak_bytes stands in for it.
  int64_t backward_peak_bytes = -1;
};

// What pipebal's engine adds to a step beyond its layers' costs, measured by the profiler on a
// trivial model (profiler/engine_overhead.h): once per step (handing the step to the stages'
// threads and collecting them) and once per action of a stage (taking and posting its messages,
// the autograd call, the timeline), and once per message between two stages (`handoff_ms`: the
// receiving stage's thread woken and handed the message, beyond the action that posts it).
// Host time: it does not scale with a device's speed.
struct EngineCost {
  double step_ms = 0;
  double action_ms = 0;
  double handoff_ms = 0;  // 0 in profiles made before it was measured
};

// The same layers measured at another micro-batch size (`pipebal profile --chunks 1,2,4,8`):
// times and activation/output bytes change with the size, names and parameters do not.
struct SizedCosts {
  int64_t micro_batch_size = 0;
  std::vector<LayerCost> layers;  // as many as CostProfile::layers, in the same order
};

// A profile: the model's layers in execution order, and the batch size they were measured at.
struct CostProfile {
  std::string model;
  // Where and how it was measured ("cpu", "cuda:0"; "wallclock", "cupti"); empty when the
  // document does not say. For people and reports: the balancer does not read them.
  std::string device;
  std::string backend;
  int64_t batch_size = 0;  // the micro-batch size measured; 0 when the document does not say
  // What it was measured for: the mini-batch's input shape (batch first) in `chunks`
  // micro-batches; 0 and empty when the document does not say (a hand-written profile).
  int chunks = 0;
  std::vector<int64_t> input_shape;
  int threads = 0;  // intra-op threads it was measured with; 0 when the document does not say
  // The mini-batch's forward arguments as `--input` specs, e.g. "int64[32,64]:1000"; empty when
  // the document does not say (input_shape alone: one input of the model's kind).
  std::vector<std::string> inputs;
  // The floating-point dtype it was measured in ("float32"); empty when the document does not say.
  std::string dtype;
  std::vector<LayerCost> layers;
  // Every micro-batch size measured, ascending, the one of `layers` included; empty when only
  // batch_size was (balance/micro_batch_costs.h interpolates between them).
  std::vector<SizedCosts> sizes;
  std::optional<LinkModel> link;     // measured between two ranks (`pipebal link`), if it was
  std::optional<EngineCost> engine;  // measured with the layers, if it was
  // What other work took of the machine while it was measured, if the document says.
  std::optional<MachineLoad> machine_load;

  // The mini-batch size, input_shape[0]; 0 when not said.
  int64_t mini_batch_size() const { return input_shape.empty() ? 0 : input_shape[0]; }
};

// The micro-batch count `profile` was measured for: its `chunks`, else, in a document that does
// not say (a hand-written profile), the count that cuts its mini-batch into micro-batches of its
// batch_size; 0 where neither tells.
int measured_chunks(const CostProfile& profile);

// The micro-batch count to plan `profile` for: `requested` (0: none given) when the profile
// was measured at its micro-batch size, else the profile's own count (kDefaultChunks when it
// does not say). Throws std::invalid_argument, naming both micro-batch sizes, when `requested`
// cuts the profiled mini-batch into micro-batches of another size than the one measured (or,
// for a profile measured at several sizes, outside the range they span).
int planned_chunks(const CostProfile& profile, int requested);

// Bounds on what a profile may say, far beyond real models: within them a sum of byte counts
// over layers (2^42 x 2^18 = 2^60), and the few such sums a stage's memory term adds, fit in 64
// bits (CostModel saturates the products with micro-batch counts), and sums of times stay finite.
constexpr double kMaxLayerMs = 1e12;
constexpr int64_t kMaxLayerBytes = int64_t{1} << 42;
constexpr size_t kMaxLayers = size_t{1} << 18;
// The engine's own costs (per step, action, message): far beyond a real engine's microseconds.
constexpr double kMaxEngineMs = 1e6;

// Throws std::invalid_argument naming the first layer (index and name) and field that is NaN,
// infinite, negative or beyond the bounds above, or when there are more than kMaxLayers.
void validate_layer_costs(const std::vector<LayerCost>& layers);

// Whether `dtype` names a floating dtype a profile or plan may be measured in ("" too: not
// said). What the documents' readers refuse otherwise, with kFloatDtypes as the choice.
bool is_float_dtype_name(const std::string& dtype);
inline constexpr const char* kFloatDtypes = "float32, float64, float16 or bfloat16";

}  // namespace pipebal::balance
