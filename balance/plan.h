// A plan: the balance vector a partitioner chose, what each stage costs under the cost model,
// and the simulator's prediction of the step time. Written and read as `pipebal.plan/1`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "pipebal/balance/cost_model.h"
#include "pipebal/balance/simulator.h"
#include "pipebal/pipeline/schedule.h"

namespace pipebal::balance {

struct StagePlan {
  int first_layer = 0;
  int layers = 0;
  // The stage's layers by name: torchgpipe's balance list counts them, and
  // torch.distributed.pipelining's split points name the first of each stage.
  std::vector<std::string> layer_names;
  double time_ms = 0;       // compute per micro-batch (CostModel::time_ms)
  double transfer_ms = 0;   // of its output to the next stage, one way
  double allreduce_ms = 0;  // of its gradients over the replicas, once per step
  // What its own actions hold at their peak (CostModel::memory_bytes): the timing-free bound the
  // balance keeps within the cap.
  int64_t memory_bytes = 0;
  // The predicted peak: memory_bytes and the messages it sent that wait for their receiver on
  // the simulated timeline (SimulationResult::timed_peak_bytes). A plan file without it reads
  // it as memory_bytes.
  int64_t timed_memory_bytes = 0;
  int64_t memory_cap_bytes = kUnlimitedBytes;  // omitted from JSON when unlimited
  double speed = 1;
};

struct Prediction {
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::kGPipe;
  int chunks = 1;
  double step_ms = 0;        // simulated, the mini-batch in `chunks` micro-batches
  double naive_step_ms = 0;  // simulated, same balance, the mini-batch as one micro-batch
  double speedup = 0;        // naive_step_ms / step_ms
  double bubble_fraction = 0;
};

struct Plan {
  std::string model;  // from the profile; may be empty
  // The mini-batch's input shape (batch first) the profile was measured for; may be empty.
  std::vector<int64_t> input_shape;
  // Its forward arguments as `--input` specs when the profile said them; train --plan uses them.
  std::vector<std::string> inputs;
  // The dtype the profile was measured in, which train --plan converts the model to; may be empty.
  std::string dtype;
  std::string algorithm;
  std::vector<int> balance;  // layers per stage
  std::vector<StagePlan> stages;
  // Max over stages of time_ms + transfer_ms + the engine's cost of the stage's actions + its
  // all-reduce over the micro-batches (CostModel::cost_ms).
  double bottleneck_ms = 0;
  Prediction prediction;
  // The options the plan was made under.
  int chunks = 1;
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::kGPipe;
  int virtual_stages = 1;  // stages per device (interleaved); 1 is omitted from JSON
  // zb-h1: each stage's W delay (pipeline::Schedule::weight_delays); empty otherwise, and in a
  // file from before they were written (train then runs H1's).
  std::vector<int> weight_delays;
  // The interleaved search (interleaved_partition.h): prefixes visited, and whether it saw them
  // all (the balance is then the minimum simulated step); 0 nodes: no search (omitted).
  int64_t search_nodes = 0;
  bool search_exhaustive = true;
  pipeline::CheckpointMode checkpoint = pipeline::CheckpointMode::kExceptLast;
  double param_scale = 2;
  double bandwidth_bytes_per_ms = 0;
  double latency_ms = 0;  // added to every transfer (a link measured by `pipebal link`); 0 omitted
  int replicas = 1;       // pipelines trained data-parallel (train --plan runs as many)
  double allreduce_bytes_per_ms = 0;
  // Intra-op threads per stage the costs were measured with, which train --plan uses unless
  // told otherwise; 0: not said (omitted from JSON).
  int threads_per_stage = 0;

  // True when every device's predicted peak (its stages' timed_memory_bytes together) is within
  // its cap.
  bool fits_memory() const;
  // Memory per device: the sum over its stages (d, d + devices, ... when interleaved) of their
  // memory_bytes, and of their timed_memory_bytes (the predicted peak).
  std::vector<int64_t> device_memory_bytes() const;
  std::vector<int64_t> device_timed_memory_bytes() const;
  // Every stage's layer names in order: the layers of the model the plan was made for. Empty
  // when a stage does not name each of its layers (a plan written by hand).
  std::vector<std::string> layer_names() const;
};

// Costs `balance` under `model` and simulates it. Throws std::invalid_argument when the balance
// does not have one non-empty entry per stage summing to the layer count.
Plan make_plan(const CostModel& model, const std::vector<int>& balance,
               const std::string& algorithm);

// `plan` costed and simulated again from `profile` (another profile of the same model and input,
// e.g. one taken later on a machine whose speed drifts): its balance, schedule, W delays,
// checkpointing, micro-batches, device speeds, links and replicas kept, the engine's costs
// `profile`'s. Memory caps are not kept: what ran is priced, fitting or not. Throws
// std::invalid_argument when the profile's layers or mini-batch are not the plan's.
Plan reprice_plan(const CostProfile& profile, const Plan& plan);

// "3,3,2" -> {3, 3, 2}; throws std::invalid_argument for anything else.
std::vector<int> parse_balance(const std::string& text);

// The simulated timeline of `balance` when the mini-batch (options().chunks profiled
// micro-batches) is split into `chunks` micro-batches instead, costs scaling linearly with the
// micro-batch size; the model's schedule kind and checkpoint mode. What a report draws.
SimulationResult simulate_balance(const CostModel& model, const std::vector<int>& balance,
                                  int chunks);

// `pipebal.plan/1` document and back. plan_from_json rejects another schema or major version,
// and throws std::invalid_argument "FILE: path.to.field ..." for a field that is missing,
// mistyped or out of range (common/json_reader.h).
nlohmann::json plan_to_json(const Plan& plan);
Plan plan_from_json(const nlohmann::json& doc, const std::string& file = "plan");

// Atomic write of plan_to_json (indented) and read of a plan file; read errors name the path.
void write_plan(const std::string& path, const Plan& plan);
Plan read_plan(const std::string& path);

}  // namespace pipebal::balance
