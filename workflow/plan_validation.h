// Validating the planner: profile a model at several micro-batch sizes, let
// balance::search_plans rank every configuration for the devices, then train the best few, the
// plain model (on one device's threads and on all of them), and the user's own configuration
// side by side (step by step in turns) and set the predicted step times and ranks beside the
// measured ones. What `pipebal validate --auto` runs.
//
//   workflow::AutoValidateSettings settings;
//   settings.model = "mlp:layers=8,width=256";
//   settings.devices = 2;
//   settings.output = "out";
//   const workflow::AutoValidation result = workflow::validate_plan(settings);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "pipebal/balance/planner.h"
#include "pipebal/models/zoo.h"
#include "pipebal/pipeline/schedule.h"
#include "pipebal/workflow/validation.h"

namespace pipebal::workflow {

// A configuration the user runs today, to be set beside the plan's.
struct UserConfiguration {
  int stages = 2;
  int chunks = pipeline::kDefaultChunks;
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::kGPipe;
  pipeline::CheckpointMode checkpoint = pipeline::CheckpointMode::kExceptLast;
};

struct AutoValidateSettings {
  std::string model = models::default_model_spec();
  std::vector<int64_t> input_shape;  // batch first; empty: the model's default
  std::vector<std::string> inputs;   // --input specs instead, one per forward argument
  std::string dtype;                 // the model and its floating inputs converted; empty: as is
  int devices = 2;                   // CPU stages of threads_per_stage threads each
  // Micro-batch counts to profile; empty: 1, 2, 4, ... up to 16 that divide the batch.
  std::vector<int> chunks;
  int top = 3;  // the plan's best configurations trained; 0: every configuration searched
  double min_gain = 0.05;  // balance::PlanSearch::min_gain: the recommendation, trained first
  std::vector<pipeline::ScheduleKind> schedules;      // searched; empty: all
  std::vector<pipeline::CheckpointMode> checkpoints;  // searched; empty: all
  std::optional<UserConfiguration> user;
  int steps = 5;
  int warmup_steps = 2;
  int profile_repeat = 10;  // timed passes per layer and size, split among the rounds
  // The profile is taken in this many rounds, one after the other, each every size and the plain
  // model on all threads, then pooled (profiler/profile_merge.h): a few slow seconds of a shared
  // machine then skew one round's passes, not the whole profile. At most profile_repeat rounds.
  int profile_rounds = 3;
  // Also profile once more after each round of measured steps, in turns with the runs, and
  // predict every configuration trained again from that profile (its balance kept): how far the
  // prediction was off because the machine changed between profile and runs. The plain model on
  // several threads is profiled on its run's stage thread, with that run's pool (a pool of its
  // own beside the runs' would slow its profile).
  bool profile_in_turns = false;
  int threads_per_stage = 1;  // intra-op threads (`--threads`)
  // Pin each device's stage thread to threads_per_stage cores of its own
  // (common/thread_pinning.h), time the plain model on each block before the profile and after
  // it, and plan with their speeds (the fastest first, where the plain model runs); profile on
  // the first block, co-runners on the others. Without it, the scheduler
  // places the threads, and cores that differ in speed make the runs differ from the profile.
  bool bind_cores = false;
  uint64_t seed = 0;
  // As ValidateSettings::step_timeout_s: a training step over it throws; profiling without
  // progress for that long ends the process (watchdog.h). 0: no limit.
  double step_timeout_s = 0;
  std::string output;  // the directory
};

struct CheckedConfiguration {
  std::vector<std::string> labels;  // "recommended", "plan 1", "plain", "yours"
  balance::Configuration config;
  // Every measured step, one a round in round order: all configurations were measured in the
  // same rounds (reports::median_ratio_by_round compares two of them round by round).
  std::vector<double> measured_steps_ms;
  double measured_step_ms = 0;  // their median
  // Predicted from the profile taken in turns with the runs (profile_in_turns); 0: not taken (for
  // the plain model on several threads: not at its thread count).
  double predicted_in_turns_ms = 0;
  int predicted_rank = 0;  // among the configurations trained, 1: fastest
  int measured_rank = 0;
};

struct AutoValidation {
  std::string model;
  std::vector<int64_t> input_shape;
  int devices = 0;
  // With bind_cores: each device's CPUs, fastest first (by the rounds before the profile); the
  // plain model's pass timed on them, round by round, before the profile and after it; and their
  // speeds relative to the first from all those rounds (speeds_round_by_round: the plan's device
  // speeds). Empty otherwise.
  std::vector<std::vector<int>> device_cpus;
  std::vector<std::vector<double>> device_times_ms;
  std::vector<double> device_speeds;
  // With bind_cores and profile_in_turns: the speeds timed after each round (relative to the
  // first device, round by round), which the predictions in turns used.
  std::vector<double> device_speeds_in_turns;
  int searched = 0;
  std::vector<CheckedConfiguration> configurations;  // in the planner's order
};

// Where `list` holds a pipeline of one stage on each of `devices` devices at their own thread
// count (not interleaved, not replicated), whose stage threads, pinned each to its device's CPUs,
// time the cores in turns with the runs; -1 when it holds none.
int one_stage_per_device_index(const std::vector<CheckedConfiguration>& list, int devices);

// The names of the files validate_plan() writes into the output directory.
const std::vector<std::string>& plan_validation_files();

// `pipebal.plan-validation/1`.
nlohmann::json auto_validation_to_json(const AutoValidation& validation);

// Runs the loop and puts DIR/{profile,profile-threads,plan,plan-validation}.json in place at
// once (profile-threads.json: the plain model on devices x threads threads, with more than one
// device). Throws
// std::invalid_argument for bad settings before any work.
AutoValidation validate_plan(const AutoValidateSettings& settings, const StatusFn& status = {});

}  // namespace pipebal::workflow
