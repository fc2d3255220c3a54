// See validation.h.
#include "pipebal/workflow/validation.h"

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <functional>
#include <iostream>
#include <utility>

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pipebal/balance/partition.h"
#include "pipebal/balance/plan.h"
#include "pipebal/balance/profile_reader.h"
#include "pipebal/common/atomic_file.h"
#include "pipebal/common/schema.h"
#include "pipebal/distributed/launcher.h"
#include "pipebal/models/synthetic.h"
#include "pipebal/pipeline/batch.h"
#include "pipebal/pipeline/pipeline.h"
#include "pipebal/profiler/device.h"
#include "pipebal/profiler/environment.h"
#include "pipebal/profiler/profile_json.h"
#include "pipebal/profiler/profiler.h"
#include "pipebal/reports/html_report.h"
#include "pipebal/reports/run_record.h"
#include "pipebal/workflow/interleaved_runs.h"
#include "pipebal/workflow/run_checks.h"
#include "pipebal/workflow/training_run.h"
#include "pipebal/workflow/watchdog.h"

namespace pipebal::workflow {
namespace {

void write_json(const std::string& path, const nlohmann::json& doc) {
  write_file_atomically(path, doc.dump(2) + "\n");
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

using SayFn = std::function<void(const std::string&)>;

// What the phases share: the settings, the model and its data, where files go.
struct Run {
  const ValidateSettings& settings;
  models::Model model;
  std::vector<models::InputSpec> inputs;
  models::SyntheticData data;
  std::string dir;  // the staging directory
  SayFn say;

  // The mini-batch's shape: the first input's.
  const std::vector<int64_t>& shape() const { return inputs.front().shape; }
};

// The profile as a document, named like the model and recorded with what it was made for.
nlohmann::json profile_document(const Run& run, profiler::Profile profile, int chunks,
                                int co_runners) {
  profile.chunks = chunks;
  profile.input_shape = run.shape();
  if (!run.settings.inputs.empty()) profile.inputs = models::to_strings(run.inputs);
  nlohmann::json doc = profiler::profile_to_json(profile);
  doc["model"] = run.model.layers.name();
  doc["co_runners"] = co_runners;
  return doc;
}

// Phase 1: profiles at the micro-batch size the pipeline runs (with the other stages' cores
// busy) and, for the one-micro-batch baseline, at the whole batch — layer times do not scale
// linearly with the batch size. Returns {micro-batch profile, whole-batch profile}.
std::pair<nlohmann::json, nlohmann::json> profile_phase(const Run& run) {
  const ValidateSettings& p = run.settings;
  const pipeline::Batch micro_batch = pipeline::scatter(run.data.input, p.chunks).front();
  const at::Tensor micro_target =
      pipeline::scatter(pipeline::Batch(run.data.target), p.chunks).front().value();
  run.say(fmt::format("profiling {} ({} layers) at micro-batch size {} ...",
                      run.model.layers.name(), run.model.layers.size(), micro_batch.size()));
  profiler::ProfileOptions options;
  options.repeat = p.profile_repeat;
  options.co_runners = p.stages - 1;
  options.loss = models::loss_against(run.model.info.loss, micro_target);
  // A layer that never returns would hang the profile: --timeout bounds it here too.
  Watchdog watchdog(p.step_timeout_s, "profiling the first layer");
  const profiler::ProgressFn beat = [&watchdog](const profiler::ProfileProgress& progress) {
    using Phase = profiler::ProfileProgress::Phase;
    watchdog.beat(
        progress.phase == Phase::kLayers
            ? fmt::format("profiling the layer after '{}'", progress.layer)
            : fmt::format("profiling, after pass {} of {}", progress.done, progress.total));
  };
  const profiler::Profile micro_profile =
      profiler::profile_model(run.model.layers, micro_batch, options, beat);
  const nlohmann::json micro = profile_document(run, micro_profile, p.chunks, options.co_runners);
  write_json(run.dir + "/profile.json", micro);
  if (p.chunks == 1) return {micro, micro};

  run.say(fmt::format("profiling at the whole batch size {} for the one-micro-batch baseline ...",
                      run.data.input.size()));
  options.co_runners = 0;  // with one micro-batch the stages take turns
  options.loss = models::loss_against(run.model.info.loss, run.data.target);
  watchdog.beat("profiling the whole batch");
  // The engine's costs are per step, action and message, whatever the micro-batch size: the
  // baseline is priced with the ones the pipeline is (measured apart, moments later, they could
  // differ by a noise spike, making the predicted speed-up nonsense).
  options.measure_engine = false;
  profiler::Profile batch_profile =
      profiler::profile_model(run.model.layers, run.data.input, options, beat);
  batch_profile.engine = micro_profile.engine;
  const nlohmann::json batch = profile_document(run, std::move(batch_profile), 1, 0);
  write_json(run.dir + "/profile-batch.json", batch);
  return {micro, batch};
}

// One training run as `settings.processes` processes of `pipebal train`, launched like
// `pipebal launch` does; its run document is read back from `file`.
reports::RunRecord run_as_processes(const ValidateSettings& p, const TrainSettings& s,
                                    const std::string& file) {
  distributed::LaunchOptions launch;
  launch.nproc_per_node = p.processes;
  launch.master_port = 0;
  launch.discard_stdout = true;
  launch.command = {p.executable,
                    "train",
                    "--model",
                    s.model,
                    "--balance",
                    fmt::format("{}", fmt::join(s.balance, ",")),
                    "--chunks",
                    std::to_string(s.chunks),
                    "--schedule",
                    pipeline::to_string(s.schedule),
                    "--checkpoint",
                    pipeline::to_string(s.checkpoint),
                    "--threads",
                    std::to_string(s.threads_per_stage),
                    "--steps",
                    std::to_string(s.steps),
                    "--warmup-steps",
                    std::to_string(s.warmup_steps),
                    "--seed",
                    std::to_string(s.seed),
                    "--timeout",
                    fmt::format("{}", s.step_timeout_s),
                    "-q",
                    "-o",
                    file};
  for (const std::string& input : s.inputs) {
    launch.command.push_back("--input");
    launch.command.push_back(input);
  }
  if (!s.dtype.empty()) {
    launch.command.push_back("--dtype");
    launch.command.push_back(s.dtype);
  }
  if (s.schedule == pipeline::ScheduleKind::kInterleaved) {
    launch.command.push_back("--virtual");
    launch.command.push_back(std::to_string(s.virtual_stages));
  }
  if (!s.weight_delays.empty()) {
    launch.command.push_back("--weight-delays");
    launch.command.push_back(fmt::format("{}", fmt::join(s.weight_delays, ",")));
  }
  launch.log_prefix = "pipebal validate";
  const int status = distributed::launch(launch, std::cerr);
  // Interrupted: the processes are gone; the signal goes on to this process's own handler (the
  // command's: temporaries removed, 128 + the signal), as if it had come now.
  if (distributed::last_interrupt() != 0) std::raise(distributed::last_interrupt());
  if (status != 0) {
    throw std::runtime_error(fmt::format("training [{}] as {} processes failed (exit status {})",
                                         fmt::join(s.balance, ","), p.processes, status));
  }
  reports::RunRecord record = reports::run_from_json(parse_json(read_file(file), file));
  std::filesystem::remove(file);
  return record;
}

// Phase 3, one candidate: trained pipelined and with one micro-batch, step by step in turns
// (one run after the other when trained as processes), and set beside its prediction.
reports::Candidate train_candidate(const Run& run, const balance::Plan& plan,
                                   const std::vector<std::string>& algorithms,
                                   const balance::CostModel& cost_model,
                                   const balance::CostModel& naive_cost_model, bool first) {
  const ValidateSettings& p = run.settings;
  TrainSettings settings;
  settings.model = p.model;
  settings.inputs = models::to_strings(run.inputs);
  settings.dtype = p.dtype;
  settings.balance = plan.balance;
  settings.chunks = p.chunks;
  settings.schedule = p.schedule;
  settings.virtual_stages = p.virtual_stages;
  settings.weight_delays = plan.weight_delays;
  settings.checkpoint = p.checkpoint;
  settings.threads_per_stage = p.threads_per_stage;
  settings.steps = p.steps;
  settings.warmup_steps = p.warmup_steps;
  settings.seed = p.seed;
  settings.step_timeout_s = p.step_timeout_s;
  TrainSettings naive_settings = settings;
  naive_settings.chunks = 1;
  std::vector<reports::RunRecord> runs;
  if (p.processes > 0) {
    run.say(fmt::format("training {} [{}] as {} processes: {} micro-batches, then 1 ...",
                        fmt::join(algorithms, ", "), fmt::join(plan.balance, ","), p.processes,
                        p.chunks));
    runs.push_back(run_as_processes(p, settings, run.dir + "/.pipelined-run.json"));
    runs.push_back(run_as_processes(p, naive_settings, run.dir + "/.naive-run.json"));
  } else {
    run.say(fmt::format("training {} [{}]: {} micro-batches and 1, step by step in turns ...",
                        fmt::join(algorithms, ", "), fmt::join(plan.balance, ","), p.chunks));
    runs = run_interleaved({settings, naive_settings});
  }
  const reports::RunRecord& measured = runs[0];
  if (first) {
    write_json(run.dir + "/run.json", reports::run_to_json(measured));
    write_json(run.dir + "/trace.json", reports::chrome_trace(measured.timeline, measured.model,
                                                              reports::pipeline_ranks(measured)));
  }

  reports::Candidate candidate;
  candidate.algorithms = algorithms;
  candidate.balance = plan.balance;
  candidate.bottleneck_ms = plan.bottleneck_ms;
  candidate.predicted.step_ms = plan.prediction.step_ms;
  balance::CostOptions naive_options = naive_cost_model.options();
  naive_options.weight_delays = plan.weight_delays;  // as the run has them
  candidate.predicted.naive_step_ms =
      balance::make_plan(naive_cost_model.with_options(naive_options), plan.balance, plan.algorithm)
          .prediction.step_ms;
  for (const auto& s : plan.stages) {
    candidate.predicted.stage_ms.push_back(s.time_ms);
    candidate.predicted.stage_bytes.push_back(s.timed_memory_bytes);
  }
  candidate.predicted.timeline =
      to_timeline(balance::simulate_balance(cost_model, plan.balance, p.chunks));
  candidate.measured.step_ms = measured.median_step_ms;
  candidate.measured.naive_step_ms = runs[1].median_step_ms;
  for (const auto& s : measured.stages) {
    candidate.measured.stage_ms.push_back(s.busy_ms);
    candidate.measured.stage_bytes.push_back(s.peak_memory_bytes);
  }
  candidate.measured.timeline = measured.timeline;
  return candidate;
}

}  // namespace

const std::vector<std::string>& validation_files() {
  static const std::vector<std::string> files = {
      "profile.json", "profile-batch.json", "plan.json",  "run.json",
      "trace.json",   "validation.json",    "report.html"};
  return files;
}

reports::ValidationRecord validate(const ValidateSettings& p, const StatusFn& status) {
  if (p.output.empty())
    throw std::invalid_argument("validate: give an output directory with -o DIR");
  if (p.stages < 1 || p.stages > pipeline::kMaxStages) {
    throw std::invalid_argument(
        fmt::format("--stages must be from 1 to {}, got {}", pipeline::kMaxStages, p.stages));
  }
  if (p.processes != 0 && p.processes != p.stages) {
    throw std::invalid_argument(fmt::format(
        "--processes {}: each device (--stages) is one process, so give --processes {} or 0",
        p.processes, p.stages));
  }
  if (p.processes > 0 && p.executable.empty()) {
    throw std::invalid_argument("validate: training as processes needs the pipebal executable");
  }
  // Options first: a typo should not cost a profile.
  check_run_limits(p.steps, p.warmup_steps, p.step_timeout_s);
  pipeline::check_threads_per_stage(p.threads_per_stage);
  // The model's stages: the devices' (--stages) times the stages each holds.
  const int stages = p.stages * p.virtual_stages;
  balance::CostOptions cost_options;
  cost_options.schedule = p.schedule;
  cost_options.virtual_stages = p.virtual_stages;
  cost_options.weight_delays = p.weight_delays;
  cost_options.checkpoint = p.checkpoint;
  cost_options.chunks = p.chunks;

  at::set_num_threads(p.threads_per_stage);  // profile with the stages' thread count
  Run run{p, models::build_model(p.model, p.seed), {}, {}, {}, [&status](const std::string& line) {
            if (status) status(line);
          }};
  run.inputs = models::model_inputs(run.model, p.inputs, p.input_shape);
  if (!p.dtype.empty()) {
    const c10::ScalarType dtype = profiler::parse_dtype(p.dtype);
    run.model.layers.to(dtype);
    run.inputs = models::with_float_dtype(run.inputs, dtype);
  }
  if (static_cast<size_t>(stages) > run.model.layers.size()) {
    throw std::invalid_argument(fmt::format("{} stages need at least {} layers, {} has {}", stages,
                                            stages, run.model.layers.name(),
                                            run.model.layers.size()));
  }
  pipeline::make_schedule(p.schedule, stages, p.chunks, p.checkpoint, p.virtual_stages);
  run.data = models::make_synthetic_data(run.model, run.inputs, p.seed);
  // Everything is written aside and put in place at the end: never a directory mixing runs.
  StagedDirectory output(p.output, validation_files());
  run.dir = output.staging();

  // 1. Profile.
  const auto [profile_doc, batch_profile_doc] = profile_phase(run);

  // 2. Balance: dp and the baselines, each distinct balance once.
  const balance::CostProfile profile = balance::profile_from_json(profile_doc);
  const balance::CostProfile batch_profile = balance::profile_from_json(batch_profile_doc);
  if (profile.engine) cost_options.engine = *profile.engine;
  const balance::CostModel cost_model(profile.layers, stages, cost_options);
  balance::CostOptions naive_options = cost_options;
  naive_options.chunks = 1;
  if (batch_profile.engine) naive_options.engine = *batch_profile.engine;
  const balance::CostModel naive_cost_model(batch_profile.layers, stages, naive_options);
  const auto plans = candidate_plans(cost_model);
  balance::Plan best = plans.front().first;
  best.model = run.model.layers.name();
  best.input_shape = run.shape();
  if (!p.inputs.empty()) best.inputs = models::to_strings(run.inputs);
  best.dtype = p.dtype;
  balance::write_plan(run.dir + "/plan.json", best);

  // 3. Train every candidate with the same engine, pipelined and with one micro-batch.
  reports::ValidationRecord record;
  record.model = run.model.layers.name();
  record.input_shape = run.shape();
  record.stages = stages;
  record.chunks = p.chunks;
  record.schedule = pipeline::to_string(p.schedule);
  record.checkpoint = pipeline::to_string(p.checkpoint);
  record.steps = p.steps;
  record.environment = profiler::environment_json();
  for (size_t c = 0; c < plans.size(); ++c) {
    record.candidates.push_back(train_candidate(run, plans[c].first, plans[c].second, cost_model,
                                                naive_cost_model, c == 0));
  }
  write_json(run.dir + "/validation.json", reports::validation_to_json(record));

  // 4. The report, and everything in place at once.
  reports::ReportInputs inputs = reports::load_report_inputs(run.dir);
  inputs.dir = p.output;
  write_file_atomically(run.dir + "/report.html", reports::render_html_report(inputs));
  output.commit();
  return record;
}

}  // namespace pipebal::workflow
