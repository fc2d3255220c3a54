// The planner: how should this profiled model run on these devices? It searches the stage count
// (1: do not pipeline), the micro-batch count, the schedule, the checkpoint mode and, when asked,
// data-parallel replicas of the pipeline; dp_partition picks each configuration's balance and the
// simulator predicts its step, costs taken at that configuration's micro-batch size
// (micro_batch_costs.h). The answer is ranked by predicted time per mini-batch and compared with
// the plain model on one device; it recommends pipelining only when that is predicted clearly
// faster than not pipelining, and more devices only when they are predicted clearly faster than
// one (PlanSearch::min_gain).
//
//   PlanSearch search;
//   search.devices = 2;
//   const PlanSearchResult result = search_plans(read_profile("profile.json"), search);
//   write_plan("plan.json", result.recommendation().plan);
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pipebal/balance/cost_model.h"
#include "pipebal/balance/layer_cost.h"
#include "pipebal/balance/micro_batch_costs.h"
#include "pipebal/balance/plan.h"
#include "pipebal/pipeline/schedule.h"

namespace pipebal::balance {

struct PlanSearch {
  int devices = 1;
  // Per-device memory caps and speeds (one value, or one per device: a configuration of s stages
  // uses the first s devices, and each replica devices like them), bandwidths, latency and
  // parameter scale. Its chunks, schedule, checkpoint and replicas are what the search sets.
  CostOptions costs;
  // Micro-batch counts to try; empty: every count that divides the (per-replica) mini-batch into
  // micro-batches of a size the profile measured or lies between (no extrapolation), or the
  // profile's own count when it measured one size. A given count need not divide the batch (it
  // is costed at its largest micro-batches, rounded up, as balance charges it).
  std::vector<int> chunks;
  // Empty: gpipe and 1f1b. kInterleaved is searched when listed, with each of
  // `virtual_stages` stages per device (on 2 or more devices, micro-batches in whole rounds),
  // its balance from interleaved_partition.h within kPlannerSearchNodes.
  std::vector<pipeline::ScheduleKind> schedules;
  std::vector<int> virtual_stages = {2, 3};
  std::vector<pipeline::CheckpointMode> checkpoints;  // empty: all
  // Also try R > 1 copies of the pipeline trained data-parallel (stages x R <= devices, R
  // dividing the mini-batch): one process per device (`pipebal launch`).
  bool data_parallel = false;
  // Profiles of the same model measured with more intra-op threads (`pipebal profile --threads
  // T`): on CPUs the alternative to T stages of one thread is the plain model on T threads. Each
  // adds that candidate, using T devices, its whole-batch cost from the profile.
  std::vector<CostProfile> plain_profiles;
  // Rank every configuration that fits, also those another of the same shape beats in both
  // time and memory (a benchmark's grid).
  bool keep_dominated = false;
  // A pipelined configuration is recommended only when it is predicted at least this much
  // faster (0.05: 5%) than the best one that does not pipeline (one stage: the plain model on
  // one device or on several threads, its micro-batches accumulated, or data-parallel replicas
  // of it), and one of those on several devices only when it is this much faster than the
  // plain model on one device. Pipelining costs what a profile of the layers does not see
  // (hand-offs between threads or processes, a stage's caches gone cold between its actions), a
  // second thread or process what a profile on an idle machine does not (wake-ups, a core shared
  // with the rest of the system), and predictions err by more than a few percent: a predicted
  // gain smaller than that is not worth the risk, nor the devices.
  double min_gain = 0.05;
  // Called with the configurations costed so far and their number, before each and after the
  // last (a long model on many devices takes seconds).
  std::function<void(size_t done, size_t total)> on_progress;
};

// One configuration and its prediction.
// Prefixes the interleaved search visits per configuration in the planner (a whole search per
// configuration would cost seconds); the plan's `search` says whether it finished.
constexpr int64_t kPlannerSearchNodes = 20'000;

struct Configuration {
  int stages = 1;  // devices in the pipeline (interleaved: each holds virtual_stages)
  int virtual_stages = 1;
  int replicas = 1;
  int chunks = 1;
  int threads_per_stage = 0;  // set for the plain model on several threads; 0: as profiled
  int devices = 1;            // devices it occupies: stages x replicas, or the threads
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::kGPipe;
  pipeline::CheckpointMode checkpoint = pipeline::CheckpointMode::kNever;
  CostSource costs = CostSource::kMeasured;  // of the layers at its micro-batch size
  int64_t micro_batch_size = 0;
  // dp's balance costed and simulated; plan.input_shape is one replica's mini-batch, what
  // `train --plan` runs (with --replicas R processes per stage).
  Plan plan;
  double step_ms = 0;        // predicted, one mini-batch (all replicas together)
  double samples_per_s = 0;  // the whole mini-batch over step_ms; 0 when the batch is unknown
  double speedup = 0;        // the plain model's step_ms over this one's
  int64_t peak_bytes = 0;    // the busiest device's (a device holds several stages interleaved)
};

struct PlanSearchResult {
  // Every configuration that fits the memory caps, fastest first (ties to the nanosecond: fewer
  // devices, fewer stages, less memory, fewer micro-batches), without those another of the same
  // stages, replicas and chunks beats in both time and memory.
  std::vector<Configuration> ranked;
  // The plain model on one device: one stage, one micro-batch, no checkpointing, caps ignored
  // (fits_memory() says whether it fits).
  Configuration plain;
  int searched = 0;     // configurations costed
  int over_memory = 0;  // of which no partition fits the caps
  // Of those that fit, how many were left out of `ranked` as dominated, and the schedules that
  // fit somewhere but lost every configuration so (zb-h1 whose split backward never pays is
  // 1F1B at best): a user who listed them learns why none is ranked.
  int dominated = 0;
  std::vector<pipeline::ScheduleKind> dominated_schedules;
  // The profile measured one micro-batch size and no counts were given: counts other than its
  // own were not searched.
  bool one_size = false;
  // Why interleaving, though listed, was not searched ("" when it was, or was not listed): what
  // it "needs" that no configuration had (devices, whole rounds of micro-batches, layers).
  std::string interleaved_not_searched;
  // Thread counts of PlanSearch::plain_profiles not weighed: fewer than 2, or more than the
  // devices (a user who gave them learns why no such candidate is ranked).
  std::vector<int> plain_threads_not_weighed;
  // Which of `ranked` to run: the fastest, unless one that asks less of the machine is within
  // PlanSearch::min_gain of it -- then the fastest of the least demanding such kind: the plain
  // model on one device before what does not pipeline on several devices, before a pipeline.
  size_t recommended = 0;
  const Configuration& recommendation() const { return ranked.at(recommended); }
};

// The plain model on one device for `profile`'s mini-batch under `costs` (memory caps are not
// enforced; its plan's cap says whether it fits). Throws std::invalid_argument for a profile
// without its mini-batch (input_shape).
Configuration plain_model(const CostProfile& profile, const CostOptions& costs);

// One configuration (the stages, replicas, chunks, schedule and checkpoint of `shape`) costed as
// the search costs it, its speed-up over `plain`; nullopt when no partition fits the caps.
// Throws std::invalid_argument when replicas or chunks do not fit the profiled mini-batch.
std::optional<Configuration> configure(const CostProfile& profile, const CostOptions& costs,
                                       const Configuration& shape, const Configuration& plain);

// `config` as another profile of the same model prices it: its stages, chunks, schedule,
// checkpoint and replicas, and its plan's balance and W delays kept (no new balance, memory caps
// not enforced), its speed-up over `plain`. For the plain model on several threads, `profile` is
// that thread count's. What validate --auto predicts from the profile it takes in turns with the
// runs. Throws std::invalid_argument when the replicas do not divide the profiled mini-batch.
Configuration reprice(const CostProfile& profile, const CostOptions& costs,
                      const Configuration& config, const Configuration& plain);

// "2 stages, 8 micro-batches, 1f1b, checkpoint never", "the plain model on one device", ...
std::string describe(const Configuration& config);

// Throws std::invalid_argument for devices < 1, min_gain outside [0, 10], a profile without its
// mini-batch size (it needs input_shape), a given chunk count that does not divide the mini-batch,
// and when no configuration fits the memory caps (giving the smallest cap that would for the best
// stage count).
PlanSearchResult search_plans(const CostProfile& profile, const PlanSearch& search);

}  // namespace pipebal::balance
