// Comparing plans of one model on the machine: train every plan side by side, step by step in
// turns (run_interleaved), so that a slow spell of a shared machine falls on all of them alike,
// and set each plan's predicted step time and device memory beside the measured ones. With
// profile_in_turns, the model is profiled again after each round of steps and every plan
// predicted again from that profile (balance::reprice_plan). What `pipebal validate --plans`
// runs; plans made by `pipebal balance` for several schedules, say, are ranked by measurement.
//
//   workflow::PlansComparisonSettings settings;
//   settings.plans = {"gpipe.json", "1f1b.json", "zb-h1.json"};
//   settings.output = "out";
//   const workflow::PlansComparison result = workflow::compare_plans(settings);
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipebal/balance/plan.h"
#include "pipebal/workflow/validation.h"

namespace pipebal::workflow {

struct PlansComparisonSettings {
  std::vector<std::string> plans;  // pipebal.plan/1 files of one model and input
  int steps = 5;                   // measured steps per plan
  int warmup_steps = 2;
  int threads_per_stage = 0;  // intra-op threads; 0: each plan's own (1 where it does not say)
  // Profile after each round of measured steps (at the plans' micro-batch sizes, one thread, the
  // other devices' work beside it) and predict every plan again from the pooled profiles. Not for
  // plans of several threads per stage.
  bool profile_in_turns = false;
  uint64_t seed = 0;
  double step_timeout_s = 0;
  std::string output;  // the directory
  // Told of what the plans may not mean (a model named by a relative path), before any work.
  std::function<void(const std::string&)> warn;
};

struct ComparedPlan {
  std::string file;
  balance::Plan plan;
  std::vector<double> measured_steps_ms;  // every measured step, in order
  double measured_step_ms = 0;            // their median
  // Predicted from the profile taken in turns with the runs; 0: not taken, or several threads.
  double predicted_in_turns_ms = 0;
  int predicted_rank = 0;  // among the plans, 1: fastest
  int measured_rank = 0;
  std::vector<int64_t> measured_device_bytes;  // the stages' measured peaks, summed per device
};

struct PlansComparison {
  std::string model;
  std::vector<int64_t> input_shape;
  std::vector<ComparedPlan> plans;  // in the order given
  nlohmann::json environment;       // where the runs ran (reports::RunRecord::environment)
};

// The names of the files compare_plans() writes into the output directory.
const std::vector<std::string>& plans_comparison_files();

// `pipebal.plans-comparison/1`.
nlohmann::json plans_comparison_to_json(const PlansComparison& comparison);

// Trains the plans and puts DIR/plans-comparison.json (and, profiling in turns,
// DIR/profile-in-turns.json) in place at once. Throws std::invalid_argument before any work for
// no plans, a plan that cannot be read, plans of different models, inputs or dtypes, a plan that
// does not name its model, and plans with replicas (they train as processes: `pipebal launch`).
PlansComparison compare_plans(const PlansComparisonSettings& settings, const StatusFn& status = {});

}  // namespace pipebal::workflow
