// See plans_comparison.h.
#include "pipebal/workflow/plans_comparison.h"

#include <algorithm>
#include <map>
#include <optional>
#include <stdexcept>
#include <utility>

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "pipebal/balance/micro_batch_costs.h"
#include "pipebal/common/atomic_file.h"
#include "pipebal/common/distinct_paths.h"
#include "pipebal/common/error_text.h"
#include "pipebal/common/schema.h"
#include "pipebal/models/input_spec.h"
#include "pipebal/models/synthetic.h"
#include "pipebal/models/zoo.h"
#include "pipebal/profiler/device.h"
#include "pipebal/profiler/profile_json.h"
#include "pipebal/profiler/profile_merge.h"
#include "pipebal/reports/validation_record.h"
#include "pipebal/workflow/interleaved_runs.h"
#include "pipebal/workflow/profiling.h"
#include "pipebal/workflow/training_run.h"

namespace pipebal::workflow {
namespace {

// The model, input and dtype every plan shares; throws naming the first plan that differs.
void check_same_model(const std::vector<ComparedPlan>& plans) {
  const ComparedPlan& first = plans.front();
  for (const ComparedPlan& p : plans) {
    if (p.plan.model.empty()) {
      throw std::invalid_argument(
          fmt::format("{}: the plan does not name its model (make it with `pipebal balance` on "
                      "a profile)",
                      p.file));
    }
    if (p.plan.replicas > 1) {
      throw std::invalid_argument(fmt::format(
          "{}: a plan of {} replicas trains as processes (`pipebal launch ... train --plan`); "
          "--plans compares plans of one replica",
          p.file, p.plan.replicas));
    }
    const auto differs = [&](const std::string& what, const std::string& mine,
                             const std::string& theirs) {
      if (mine == theirs) return;
      throw std::invalid_argument(
          fmt::format("{} is for {} {}, {} for {}: compare plans of one model and input", p.file,
                      what, mine, first.file, theirs));
    };
    differs("the model", models::canonical_spec(p.plan.model),
            models::canonical_spec(first.plan.model));
    differs("the input shape", fmt::format("[{}]", fmt::join(p.plan.input_shape, ",")),
            fmt::format("[{}]", fmt::join(first.plan.input_shape, ",")));
    differs("the inputs", fmt::format("{}", fmt::join(p.plan.inputs, " ")),
            fmt::format("{}", fmt::join(first.plan.inputs, " ")));
    differs("the dtype", p.plan.dtype.empty() ? "as built" : p.plan.dtype,
            first.plan.dtype.empty() ? "as built" : first.plan.dtype);
  }
}

void check(const PlansComparisonSettings& s) {
  if (s.output.empty()) {
    throw std::invalid_argument("validate: give an output directory with -o DIR");
  }
  if (s.plans.empty()) throw std::invalid_argument("--plans needs at least one plan file");
  // One plan given twice would be ranked against itself under one name.
  for (size_t a = 0; a < s.plans.size(); ++a) {
    for (size_t b = a + 1; b < s.plans.size(); ++b) {
      if (s.plans[a] == s.plans[b] || same_file(s.plans[a], s.plans[b])) {
        throw std::invalid_argument(fmt::format("--plans names {} twice ({}): give each plan once",
                                                s.plans[a], s.plans[b]));
      }
    }
  }
  if (s.steps < 1) {
    throw std::invalid_argument(fmt::format("--steps must be at least 1, got {}", s.steps));
  }
  if (s.warmup_steps < 0) {
    throw std::invalid_argument(
        fmt::format("--warmup-steps must be at least 0, got {}", s.warmup_steps));
  }
  if (s.threads_per_stage < 0) {
    throw std::invalid_argument(
        fmt::format("--threads must be at least 0, got {}", s.threads_per_stage));
  }
}

int threads_of(const PlansComparisonSettings& s, const balance::Plan& plan) {
  if (s.threads_per_stage > 0) return s.threads_per_stage;
  return plan.threads_per_stage > 0 ? plan.threads_per_stage : 1;
}

TrainSettings train_settings(const PlansComparisonSettings& s, const balance::Plan& plan) {
  TrainSettings t;
  t.model = plan.model;
  t.inputs = plan.inputs;
  if (plan.inputs.empty()) t.input_shape = plan.input_shape;
  t.dtype = plan.dtype;
  t.balance = plan.balance;
  t.layer_names = plan.layer_names();
  t.chunks = plan.chunks;
  t.schedule = plan.schedule;
  t.virtual_stages = plan.virtual_stages;
  t.weight_delays = plan.weight_delays;
  t.checkpoint = plan.checkpoint;
  t.threads_per_stage = threads_of(s, plan);
  t.steps = s.steps;
  t.warmup_steps = s.warmup_steps;
  t.seed = s.seed;
  t.step_timeout_s = s.step_timeout_s;
  return t;
}

// A run's stage peaks summed per device (stage s on device s % devices); empty where a stage's
// peak was not measured.
std::vector<int64_t> device_bytes(const reports::RunRecord& run, int virtual_stages) {
  const size_t devices = run.stages.size() / std::max(virtual_stages, 1);
  std::vector<int64_t> held(devices, 0);
  for (size_t s = 0; s < run.stages.size(); ++s) {
    if (run.stages[s].peak_memory_bytes < 0) return {};
    held[s % devices] += run.stages[s].peak_memory_bytes;
  }
  return held;
}

nlohmann::json plan_json(const ComparedPlan& c) {
  const balance::Plan& p = c.plan;
  nlohmann::json json = {
      {"file", c.file},
      {"schedule", pipeline::to_string(p.schedule)},
      {"chunks", p.chunks},
      {"checkpoint", pipeline::to_string(p.checkpoint)},
      {"balance", p.balance},
      {"predicted_step_ms", p.prediction.step_ms},
      {"measured_step_ms", c.measured_step_ms},
      {"measured_steps_ms", c.measured_steps_ms},
      {"step_error", reports::relative_error(p.prediction.step_ms, c.measured_step_ms)},
      {"predicted_rank", c.predicted_rank},
      {"measured_rank", c.measured_rank},
      {"predicted_device_bytes", p.device_timed_memory_bytes()},
      {"measured_device_bytes", c.measured_device_bytes}};
  if (p.virtual_stages > 1) json["virtual_stages"] = p.virtual_stages;
  if (!p.weight_delays.empty()) json["weight_delays"] = p.weight_delays;
  if (c.predicted_in_turns_ms > 0) {
    json["predicted_in_turns_step_ms"] = c.predicted_in_turns_ms;
    json["step_error_in_turns"] =
        reports::relative_error(c.predicted_in_turns_ms, c.measured_step_ms);
  }
  return json;
}

// Profiles the plans' model after each round of steps (--profile-in-turns): one thread, as the
// stages run, at every plan's micro-batch count, the overlapping micro-batches beside the other
// devices' work.
class InTurnsProfiler {
 public:
  InTurnsProfiler(const std::vector<ComparedPlan>& plans, uint64_t seed)
      : first_(plans.front().plan), seed_(seed), model_(models::build_model(first_.model, seed)) {
    at::set_num_threads(1);
    inputs_ = models::model_inputs(
        model_, first_.inputs, first_.inputs.empty() ? first_.input_shape : std::vector<int64_t>{});
    if (!first_.dtype.empty()) {
      const c10::ScalarType dtype = profiler::parse_dtype(first_.dtype);
      model_.layers.to(dtype);
      inputs_ = models::with_float_dtype(inputs_, dtype);
    }
    for (const ComparedPlan& c : plans) {
      if (std::find(chunks_.begin(), chunks_.end(), c.plan.chunks) == chunks_.end()) {
        chunks_.push_back(c.plan.chunks);
      }
      devices_ = std::max(
          devices_, static_cast<int>(c.plan.balance.size()) / std::max(c.plan.virtual_stages, 1));
    }
    std::sort(chunks_.begin(), chunks_.end());
    // Counts that mean one micro-batch size (8 samples in 4 or in 5) share that size's profile.
    const int64_t batch = inputs_.front().shape.front();
    std::vector<int64_t> sizes;
    std::vector<int> distinct;
    for (const int m : chunks_) {
      const int64_t size = balance::micro_batch_size(batch, m);
      if (std::find(sizes.begin(), sizes.end(), size) != sizes.end()) continue;
      sizes.push_back(size);
      distinct.push_back(m);
    }
    chunks_ = distinct;
    options_.warmup = 3;  // the runs' turns left caches and pools cold
    options_.repeat = 2;
  }

  void profile_round() {
    const int devices = devices_;
    rounds_.push_back(profile_at_sizes(model_, inputs_, chunks_, seed_, options_,
                                       [devices](int m) { return m > 1 ? devices - 1 : 0; }));
  }

  // Every round's samples pooled (profiler::merge_profiles).
  profiler::Profile pooled() const {
    profiler::Profile pooled = profiler::merge_profiles(rounds_);
    if (!first_.inputs.empty()) pooled.inputs = models::to_strings(inputs_);
    return pooled;
  }

 private:
  balance::Plan first_;  // the model, input and dtype every plan shares
  uint64_t seed_;
  models::Model model_;
  std::vector<models::InputSpec> inputs_;
  std::vector<int> chunks_;
  int devices_ = 1;
  profiler::ProfileOptions options_;
  std::vector<profiler::Profile> rounds_;
};

}  // namespace

const std::vector<std::string>& plans_comparison_files() {
  // report.html: what `pipebal report DIR` adds, replaced with the rest by a new run.
  static const std::vector<std::string> files = {"plans-comparison.json", "profile-in-turns.json",
                                                 "report.html"};
  return files;
}

nlohmann::json plans_comparison_to_json(const PlansComparison& comparison) {
  nlohmann::json plans = nlohmann::json::array();
  for (const ComparedPlan& c : comparison.plans) plans.push_back(plan_json(c));
  return {{"schema", schema_tag("pipebal.plans-comparison", 1)},
          {"model", comparison.model},
          {"input_shape", comparison.input_shape},
          {"plans", std::move(plans)},
          {"environment", comparison.environment}};
}

PlansComparison compare_plans(const PlansComparisonSettings& s, const StatusFn& status) {
  check(s);
  const auto say = [&status](const std::string& line) {
    if (status) status(line);
  };
  std::vector<ComparedPlan> plans;
  for (const std::string& file : s.plans) {
    ComparedPlan c;
    c.file = file;
    c.plan = balance::read_plan(file);
    for (size_t i = 0; i < c.plan.inputs.size(); ++i) {  // said as the plan's, not as --input
      models::parse_input_spec(c.plan.inputs[i], fmt::format("{}: inputs[{}]", file, i));
    }
    plans.push_back(std::move(c));
  }
  check_same_model(plans);
  // Read from this directory, which need not be the one the plans were made in: said once per
  // path, naming every plan that gives it.
  std::map<std::string, std::vector<std::string>> relative;
  for (const ComparedPlan& c : plans) {
    const std::string path = models::relative_model_path(c.plan.model);
    if (!path.empty()) relative[path].push_back(printable(c.file));
  }
  for (const auto& [path, files] : relative) {
    if (!s.warn) break;
    s.warn(fmt::format(
        "{} {} {} model by a relative path ({}), read from the current directory: {}; run from "
        "the directory {} made in, or balance {} again (plans made now name it by its absolute "
        "path)",
        fmt::join(files, ", "), files.size() == 1 ? "names" : "name",
        files.size() == 1 ? "its" : "their", printable(path),
        printable(models::model_file_name(path)), files.size() == 1 ? "it was" : "they were",
        files.size() == 1 ? "it" : "them"));
  }
  StagedDirectory output(s.output, plans_comparison_files());

  const balance::Plan& first = plans.front().plan;
  std::optional<InTurnsProfiler> in_turns;
  if (s.profile_in_turns) in_turns.emplace(plans, s.seed);
  const auto after_round = [&](int round, const std::vector<TrainingRun*>& /*runs*/) {
    if (in_turns) in_turns->profile_round();
    say(fmt::format("round {} of {} done", round + 1, s.steps));
  };

  std::vector<TrainSettings> runs;
  for (const ComparedPlan& c : plans) runs.push_back(train_settings(s, c.plan));
  say(fmt::format("training {} plan{} of {}, step by step in turns{} ...", plans.size(),
                  plans.size() == 1 ? "" : "s", first.model,
                  s.profile_in_turns ? ", profiling after each round" : ""));
  const std::vector<reports::RunRecord> measured = run_interleaved(runs, after_round);

  std::vector<double> predicted_ms, measured_ms;
  for (size_t k = 0; k < plans.size(); ++k) {
    ComparedPlan& c = plans[k];
    for (const reports::StepSample& step : measured[k].steps) {
      c.measured_steps_ms.push_back(step.ms);
    }
    c.measured_step_ms = measured[k].median_step_ms;
    c.measured_device_bytes = device_bytes(measured[k], c.plan.virtual_stages);
    predicted_ms.push_back(c.plan.prediction.step_ms);
    measured_ms.push_back(c.measured_step_ms);
  }
  const std::vector<int> predicted_rank = reports::ranks_by_time(predicted_ms),
                         measured_rank = reports::ranks_by_time(measured_ms);
  for (size_t k = 0; k < plans.size(); ++k) {
    plans[k].predicted_rank = predicted_rank[k];
    plans[k].measured_rank = measured_rank[k];
  }
  if (in_turns) {
    const profiler::Profile pooled = in_turns->pooled();
    write_file_atomically(output.staging() + "/profile-in-turns.json",
                          profiler::profile_to_json(pooled).dump(2) + "\n");
    const balance::CostProfile costs = profiler::cost_profile(pooled);
    for (ComparedPlan& c : plans) {
      if (threads_of(s, c.plan) > 1) continue;  // profiled at one thread
      c.predicted_in_turns_ms = balance::reprice_plan(costs, c.plan).prediction.step_ms;
    }
  }

  PlansComparison comparison;
  comparison.model = first.model;
  comparison.input_shape = first.input_shape;
  comparison.plans = std::move(plans);
  comparison.environment = measured.front().environment;
  write_file_atomically(output.staging() + "/plans-comparison.json",
                        plans_comparison_to_json(comparison).dump(2) + "\n");
  output.commit();
  return comparison;
}

}  // namespace pipebal::workflow
