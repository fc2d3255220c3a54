// The pipeline schedule: for every stage, the ordered list of actions it performs in one
// training step. One definition drives both the engine (pipeline/) and the simulator
// (balance/), so a prediction and a measurement describe the same execution. Torch-free.
#pragma once

#include <cstdint>

#include <string>
#include <vector>

namespace pipebal::pipeline {

// Micro-batches per mini-batch when a command is not told: the same for profile, balance, train
// and validate, so that a profile plans and trains the batch it was measured for.
constexpr int kDefaultChunks = 4;

// Limits on a schedule's size (each stage's action list is materialised): far beyond any real
// pipeline, low enough that a typo cannot exhaust memory.
constexpr int kMaxChunks = 1 << 16;
constexpr int64_t kMaxScheduleCells = int64_t{1} << 22;

// Fill-drain (GPipe: all forwards, then all backwards), one-forward-one-backward
// (PipeDream-flush: each stage keeps at most `stages - stage` micro-batches in flight),
// interleaved 1F1B (Megatron-LM's virtual pipeline: each device holds several stages, d,
// d + devices, ..., and runs their 1F1B orders interleaved, which shrinks the bubble by the
// number of stages per device), or zero-bubble H1 (Qi et al., ICLR 2024: 1F1B whose backwards
// are split into B, the input gradient on the critical path, and W, the weight gradient, which
// fills the bubbles; each stage holds at most as many micro-batches as 1F1B's first stage, or
// fewer with shorter W delays, see Schedule::weight_delays).
enum class ScheduleKind { kGPipe, kOneFOneB, kInterleaved, kZeroBubbleH1 };

// Which micro-batches are checkpointed, as torchgpipe defines it: `kAlways` all of them,
// `kExceptLast` all but the last (whose backward follows its forward at once), `kNever` none.
enum class CheckpointMode { kAlways, kExceptLast, kNever };

// kBackward is the whole backward, except in a schedule that splits it (splits_backward): there
// it is B, the gradient of the stage's input, and kWeight is W, its parameters' gradients.
enum class ActionKind { kForward, kRecompute, kBackward, kWeight };

// A zero-bubble stage's W delay saying that it runs each backward whole, in B, with no W.
constexpr int kWholeBackward = -1;

struct Action {
  ActionKind kind = ActionKind::kForward;
  int micro_batch = 0;

  bool operator==(const Action& other) const {
    return kind == other.kind && micro_batch == other.micro_batch;
  }
};

// One action of a device's order: the stage it belongs to and its index in that stage's list.
struct DeviceStep {
  int stage = 0;
  int index = 0;

  bool operator==(const DeviceStep& other) const {
    return stage == other.stage && index == other.index;
  }
};

struct Schedule {
  ScheduleKind kind = ScheduleKind::kGPipe;
  CheckpointMode checkpoint = CheckpointMode::kNever;
  int stages = 0;          // the model's stages (interleaved: devices x virtual_stages)
  int virtual_stages = 1;  // stages per device; device d holds stages d, d + devices, ...
  int chunks = 0;
  // Zero-bubble only: stage s runs micro-batch k's W right after its B of micro-batch
  // k + weight_delays[s] (the W's left run after the last B). A stage holds a micro-batch's
  // activations from its F to its W, so each unit of delay holds one more micro-batch while it
  // lets W fill a wait for a gradient. H1's delays are 0, 1, ..., stages - 1; 0 everywhere is
  // 1F1B with each backward in two halves. kWholeBackward: the stage does not split its
  // backward (1F1B's order and memory there). At most `chunks`; empty for other schedules.
  std::vector<int> weight_delays;
  std::vector<std::vector<Action>> actions;  // actions[stage], in execution order
  // Each device's actions in execution order across its stages, one at a time; with one stage
  // per device, that stage's list.
  std::vector<std::vector<DeviceStep>> device_order;

  int devices() const { return stages / virtual_stages; }
  int device_of(int stage) const { return stage % devices(); }
  // True when `stage` runs B (kBackward) and W (kWeight) apart.
  bool splits(int stage) const {
    return kind == ScheduleKind::kZeroBubbleH1 && weight_delays[stage] != kWholeBackward;
  }
};

// Builds the schedule for `stages` stages and `chunks` micro-batches; with kInterleaved,
// `virtual_stages` stages per device; with kZeroBubbleH1, `weight_delays` per stage (empty:
// H1's, h1_weight_delays). A checkpointed micro-batch gets a Recompute action immediately before
// its Backward. Throws std::invalid_argument when stages or chunks is below 1, when
// virtual_stages is not 1 for GPipe and 1F1B, for interleaved when stages is not a multiple of
// virtual_stages or chunks (above 1) not a multiple of the devices (the order needs whole rounds
// of micro-batches), and when weight delays are given to another schedule, are not one per
// stage or one is below kWholeBackward. A delay above `chunks` is `chunks`: every W after the
// last B.
Schedule make_schedule(ScheduleKind kind, int stages, int chunks, CheckpointMode checkpoint,
                       int virtual_stages = 1, const std::vector<int>& weight_delays = {});

// Zero-bubble H1's W delays (Qi et al.): stage s defers its W's by s micro-batches (at most
// `chunks`), the most that shortens the step when every stage costs the same, and holds
// min(stages, chunks) micro-batches.
std::vector<int> h1_weight_delays(int stages, int chunks);

// True when `kind` splits backwards into B (kBackward) and W (kWeight), on every stage but those
// whose W delay is kWholeBackward (Schedule::splits).
inline bool splits_backward(ScheduleKind kind) {
  return kind == ScheduleKind::kZeroBubbleH1;
}

// Validates a balance vector (layers per stage) against a layer count and, when `stages` > 0,
// a stage count; throws std::invalid_argument saying which entry or sum is wrong. What the
// engine and the balancer both check.
void check_balance(const std::vector<int>& balance, size_t layers, int stages = 0);

// True when micro-batch `micro_batch` of `chunks` runs its forward without keeping activations.
bool is_checkpointed(CheckpointMode mode, int micro_batch, int chunks);

// Names used on the command line and in JSON: "gpipe", "1f1b", "interleaved", "zb-h1";
// "always", "except_last", "never"; "F", "R", "B", "W". The parsers throw std::invalid_argument
// listing the valid names.
std::string to_string(ScheduleKind kind);
std::string to_string(CheckpointMode mode);
std::string to_string(ActionKind kind);
ScheduleKind parse_schedule_kind(const std::string& name);
ActionKind parse_action_kind(const std::string& name);
CheckpointMode parse_checkpoint_mode(const std::string& name);

}  // namespace pipebal::pipeline
