// See validation.h.
#include "workflow/validation.h"

#include <algorithm>
#include <optional>

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "balance/partition.h"
#include "balance/plan.h"
#include "balance/profile_reader.h"
#include "models/synthetic.h"
#include "pipeline/batch.h"
#include "profiler/environment.h"
#include "profiler/profile_json.h"
#include "profiler/profiler.h"
#include "reports/atomic_file.h"
#include "reports/html_report.h"
#include "reports/run_record.h"
#include "workflow/training_run.h"
#include "workflow/watchdog.h"

namespace pipebal::workflow {
namespace {

void write_json(const std::string& path, const nlohmann::json& doc) {
  reports::write_file_atomically(path, doc.dump(2) + "\n");
}

pipeline::Timeline to_timeline(const balance::SimulationResult& simulated) {
  pipeline::Timeline timeline;
  for (const auto& stage : simulated.timeline)
    timeline.insert(timeline.end(), stage.begin(), stage.end());
  return timeline;
}

// The distinct balances the partitioners choose, each with the algorithms that chose it.
std::vector<std::pair<balance::Plan, std::vector<std::string>>> candidate_plans(
    const balance::CostModel& cost_model) {
  std::vector<std::pair<balance::Plan, std::vector<std::string>>> plans;
  for (auto algorithm : {balance::Algorithm::kDp, balance::Algorithm::kBlockPartition,
                         balance::Algorithm::kUniform}) {
    balance::Plan plan = balance::partition(cost_model, algorithm);
    auto same = std::find_if(plans.begin(), plans.end(),
                             [&](const auto& p) { return p.first.balance == plan.balance; });
    if (same != plans.end()) {
      same->second.push_back(plan.algorithm);
    } else {
      std::vector<std::string> names{plan.algorithm};
      plans.emplace_back(std::move(plan), std::move(names));
    }
  }
  return plans;
}

}  // namespace

const std::vector<std::string>& validation_files() {
  static const std::vector<std::string> files = {
      "profile.json", "profile-batch.json", "plan.json",  "run.json",
      "trace.json",   "validation.json",    "report.html"};
  return files;
}

reports::ValidationRecord validate(const ValidateSettings& p, const StatusFn& status) {
  const auto say = [&status](const std::string& line) {
    if (status) status(line);
  };
  if (p.output.empty())
    throw std::invalid_argument("validate: give an output directory with -o DIR");
  if (p.stages < 1)
    throw std::invalid_argument(fmt::format("stages must be at least 1, got {}", p.stages));
  // Options first: a typo should not cost a profile.
  balance::CostOptions cost_options;
  cost_options.schedule = pipeline::parse_schedule_kind(p.schedule);
  cost_options.checkpoint = pipeline::parse_checkpoint_mode(p.checkpoint);
  cost_options.chunks = p.chunks;

  // 1. Profile at the micro-batch size the pipeline runs, with the stages' thread count.
  at::set_num_threads(p.threads);
  models::Model model = models::build_model(p.model, p.seed);
  const std::vector<int64_t> shape =
      p.input_shape.empty() ? model.info.default_input_shape : models::parse_shape(p.input_shape);
  if (static_cast<size_t>(p.stages) > model.layers.size()) {
    throw std::invalid_argument(fmt::format("{} stages need at least {} layers, {} has {}",
                                            p.stages, p.stages, model.layers.name(),
                                            model.layers.size()));
  }
  const models::SyntheticData data = models::make_synthetic_data(model, shape, p.seed);
  // Everything is written aside and put in place at the end: never a directory mixing runs.
  reports::StagedDirectory output(p.output, validation_files());
  const std::string dir = output.staging();
  const pipeline::Batch micro_batch = pipeline::scatter(data.input, p.chunks).front();
  const at::Tensor micro_target =
      pipeline::scatter(pipeline::Batch(data.target), p.chunks).front().value();
  say(fmt::format("profiling {} ({} layers) at micro-batch size {} ...", model.layers.name(),
                  model.layers.size(), micro_batch.size()));
  profiler::ProfileOptions profile_options;
  profile_options.repeat = p.profile_repeat;
  // The pipelined stages run side by side: profile with the other stages' cores busy.
  profile_options.co_runners = p.stages - 1;
  profile_options.loss = models::loss_against(model.info.loss, micro_target);
  // A layer that never returns would hang the profile: --timeout bounds it here too.
  std::optional<Watchdog> watchdog;
  watchdog.emplace(p.step_timeout_s, "profiling the first layer");
  const profiler::ProgressFn beat = [&watchdog](const profiler::ProfileProgress& progress) {
    using Phase = profiler::ProfileProgress::Phase;
    watchdog->beat(
        progress.phase == Phase::kLayers
            ? fmt::format("profiling the layer after '{}'", progress.layer)
            : fmt::format("profiling, after pass {} of {}", progress.done, progress.total));
  };
  profiler::Profile profile =
      profiler::profile_model(model.layers, micro_batch, profile_options, beat);
  profile.chunks = p.chunks;
  profile.input_shape = shape;
  nlohmann::json profile_doc = profiler::profile_to_json(profile);
  profile_doc["model"] = model.layers.name();
  profile_doc["co_runners"] = profile_options.co_runners;
  write_json(dir + "/profile.json", profile_doc);
  // Layer times do not scale linearly with the batch size (small batches use the cores less
  // well), so the one-micro-batch baseline is predicted from a profile of the whole batch.
  nlohmann::json batch_profile_doc = profile_doc;
  if (p.chunks > 1) {
    say(fmt::format("profiling at the whole batch size {} for the one-micro-batch baseline ...",
                    data.input.size()));
    // With one micro-batch the stages take turns: no co-runners.
    profiler::ProfileOptions batch_options = profile_options;
    batch_options.co_runners = 0;
    batch_options.loss = models::loss_against(model.info.loss, data.target);
    watchdog->beat("profiling the whole batch");
    profiler::Profile batch_profile =
        profiler::profile_model(model.layers, data.input, batch_options, beat);
    batch_profile.chunks = 1;
    batch_profile.input_shape = shape;
    batch_profile_doc = profiler::profile_to_json(batch_profile);
    batch_profile_doc["model"] = model.layers.name();
    write_json(dir + "/profile-batch.json", batch_profile_doc);
  }

  watchdog.reset();  // training steps have the pipeline's own timeout

  // 2. Balance: dp and the baselines, each distinct balance once.
  const balance::CostModel cost_model(balance::profile_from_json(profile_doc).layers, p.stages,
                                      cost_options);
  balance::CostOptions naive_options = cost_options;
  naive_options.chunks = 1;
  const balance::CostModel naive_cost_model(balance::profile_from_json(batch_profile_doc).layers,
                                            p.stages, naive_options);
  const auto plans = candidate_plans(cost_model);
  balance::Plan best = plans.front().first;
  best.model = model.layers.name();
  best.input_shape = shape;
  balance::write_plan(dir + "/plan.json", best);

  // 3. Train every candidate with the same engine, pipelined and with one micro-batch.
  reports::ValidationRecord record;
  record.model = model.layers.name();
  record.input_shape = shape;
  record.stages = p.stages;
  record.chunks = p.chunks;
  record.schedule = p.schedule;
  record.checkpoint = p.checkpoint;
  record.steps = p.steps;
  record.environment = profiler::environment_json();
  for (size_t c = 0; c < plans.size(); ++c) {
    const auto& [plan, algorithms] = plans[c];
    TrainSettings settings;
    settings.model = p.model;
    settings.input_shape = shape;
    settings.balance = plan.balance;
    settings.chunks = p.chunks;
    settings.schedule = p.schedule;
    settings.checkpoint = p.checkpoint;
    settings.threads_per_stage = p.threads;
    settings.steps = p.steps;
    settings.warmup_steps = p.warmup_steps;
    settings.seed = p.seed;
    settings.step_timeout_s = p.step_timeout_s;
    TrainSettings naive_settings = settings;
    naive_settings.chunks = 1;
    say(fmt::format("training {} [{}]: {} micro-batches and 1, step by step in turns ...",
                    fmt::join(algorithms, ", "), fmt::join(plan.balance, ","), p.chunks));
    const std::vector<reports::RunRecord> runs = run_interleaved({settings, naive_settings});
    const reports::RunRecord& run = runs[0];
    const reports::RunRecord& naive = runs[1];
    if (c == 0) {
      write_json(dir + "/run.json", reports::run_to_json(run));
      write_json(dir + "/trace.json", reports::chrome_trace(run.timeline, run.model));
    }

    reports::Candidate candidate;
    candidate.algorithms = algorithms;
    candidate.balance = plan.balance;
    candidate.bottleneck_ms = plan.bottleneck_ms;
    candidate.predicted.step_ms = plan.prediction.step_ms;
    candidate.predicted.naive_step_ms =
        balance::make_plan(naive_cost_model, plan.balance, plan.algorithm).prediction.step_ms;
    for (const auto& s : plan.stages) {
      candidate.predicted.stage_ms.push_back(s.time_ms);
      candidate.predicted.stage_bytes.push_back(s.memory_bytes);
    }
    candidate.predicted.timeline =
        to_timeline(balance::simulate_balance(cost_model, plan.balance, p.chunks));
    candidate.measured.step_ms = run.median_step_ms;
    candidate.measured.naive_step_ms = naive.median_step_ms;
    for (const auto& s : run.stages) {
      candidate.measured.stage_ms.push_back(s.busy_ms);
      candidate.measured.stage_bytes.push_back(s.peak_memory_bytes);
    }
    candidate.measured.timeline = run.timeline;
    record.candidates.push_back(std::move(candidate));
  }
  write_json(dir + "/validation.json", reports::validation_to_json(record));

  // 4. The report.
  reports::ReportInputs inputs = reports::load_report_inputs(dir);
  inputs.dir = p.output;
  reports::write_file_atomically(dir + "/report.html", reports::render_html_report(inputs));
  output.commit();
  return record;
}

}  // namespace pipebal::workflow
