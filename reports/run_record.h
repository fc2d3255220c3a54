// What a training run measured, as the `pipebal.run/1` document: per-step times and losses,
// per-stage busy time and memory, and the timeline of one representative step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipebal/common/json_reader.h"
#include "pipebal/pipeline/timeline.h"

namespace pipebal::reports {

struct StepSample {
  int step = 0;
  double ms = 0;
  double loss = 0;
};

struct StageRun {
  int index = 0;
  int first_layer = 0;
  int layers = 0;
  double busy_ms = 0;        // in the representative step
  double busy_fraction = 0;  // busy_ms / that step's span
  // Most bytes allocated by the stage's worker and alive at once during a step (activations,
  // gradients, recomputation): counted on CPU stages, -1 where not measured.
  int64_t peak_memory_bytes = -1;
};

// One process of a multi-process run (absent in a run of one process).
struct ProcessRun {
  int rank = 0;
  int stage = 0;  // the stage it runs; interleaved: its first, then every pipeline-width-th
  int replica = 0;
  std::string host;
  int64_t peak_rss_bytes = -1;  // the process's peak resident set, -1 where unknown
  // The CPU time it took over the run, all its threads together (a second per second on each
  // core it kept busy); -1 where unknown.
  double cpu_seconds = -1;
  // How far its timeline may be shifted against rank 0's: the clock alignment's uncertainty.
  double clock_uncertainty_ms = 0;
  // The ranks its messages went to and came from through shared memory, not the network.
  std::vector<int> shared_memory_peers;
};

struct RunRecord {
  std::string model;
  std::vector<int64_t> input_shape;
  std::vector<std::string> inputs;  // one spec per forward argument: "int64[32,64]:1000"
  std::string dtype;  // what --dtype converted the model to; empty: trained as it was loaded
  std::vector<int> balance;
  std::vector<std::string> devices;
  int chunks = 1;
  std::string schedule;
  int virtual_stages = 1;          // stages per device (interleaved); 1 is omitted from JSON
  std::vector<int> weight_delays;  // zb-h1's W delay per stage; empty (omitted) otherwise
  std::string checkpoint;
  int threads_per_stage = 1;
  std::string optimizer;
  double lr = 0;
  uint64_t seed = 0;
  int warmup_steps = 0;
  std::vector<StepSample> steps;  // measured steps only (warm-up excluded)
  double median_step_ms = 0;
  double p10_step_ms = 0;
  double p90_step_ms = 0;
  double samples_per_s = 0;
  std::vector<StageRun> stages;
  int replicas = 1;  // pipelines trained data-parallel, each on input_shape's batch
  std::string loss;  // cross_entropy, mse, nll or none
  std::string data;  // the user's data file; empty: a synthetic batch, every step
  std::vector<ProcessRun> processes;  // one per rank of a multi-process run; empty otherwise
  pipeline::Timeline timeline;        // of the step whose time is closest to the median
  // Which of `steps` that is (the stages' busy times are its too); -1: not said.
  int timeline_step = -1;
  nlohmann::json environment = nlohmann::json::object();
};

// Bounds on what a timeline read from a file may say, far beyond any pipeline pipebal runs
// (pipeline::kMaxStages, pipeline::kMaxChunks): a report sizes its drawing by them.
constexpr int kMaxTimelineStages = 4096;
constexpr int kMaxTimelineMicroBatches = 1 << 16;

// A time in ms read from a record: finite, in [min, balance::kMaxLayerMs] (a report's charts
// scale by it, and a profile's layer times have the same bound). Throws naming the field.
double read_ms(const JsonReader& value, double min = 0);
// read_ms of the member `key`; NaN when it is absent or null.
double read_ms_or_nan(const JsonReader& parent, const char* key);

nlohmann::json timeline_to_json(const pipeline::Timeline& timeline);
// The inverse of timeline_to_json; throws std::invalid_argument naming the event and field that
// is missing, mistyped or out of range (a stage beyond `stages`, the run's, or a micro-batch
// beyond the bounds above, an end before its start).
pipeline::Timeline timeline_from_json(const JsonReader& events, int stages = kMaxTimelineStages);
pipeline::Timeline timeline_from_json(const nlohmann::json& events);
nlohmann::json run_to_json(const RunRecord& run);
// The inverse of run_to_json (a pipebal.run/1 document). What earlier writers of the schema left
// out reads as its default (NaN for lr and the step percentiles, nothing for stages and timeline).
// Throws std::invalid_argument "FILE: path.to.field ..." for a field that is missing, of the
// wrong type or out of range.
RunRecord run_from_json(const nlohmann::json& doc, const std::string& file = "run");

// Chrome trace-event document (Perfetto, chrome://tracing): one track per stage, one slice per
// action, named "F3" / "R3" / "B3" for micro-batch 3. With `ranks` > 0 (a multi-process run of
// that many ranks per pipeline) each stage's track sits in the process lane of the rank that ran
// it (stage s on rank s % ranks), named after the rank.
nlohmann::json chrome_trace(const pipeline::Timeline& timeline, const std::string& title,
                            int ranks = 0);

// The ranks that ran one pipeline of a multi-process run (those of replica 0); 0 for a run in
// one process.
int pipeline_ranks(const RunRecord& run);

}  // namespace pipebal::reports
