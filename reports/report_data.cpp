// See report_data.h. Every document is read by its schema's one reader, with errors naming the
// file; what is derived here (busy time per step, prediction errors) is computed, not read.
#include "pipebal/reports/report_data.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pipebal/balance/layer_cost.h"
#include "pipebal/balance/plan.h"
#include "pipebal/balance/profile_reader.h"
#include "pipebal/common/atomic_file.h"
#include "pipebal/common/error_text.h"
#include "pipebal/common/schema.h"
#include "pipebal/reports/run_record.h"

namespace pipebal::reports {
namespace {

using nlohmann::json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::optional<json> load_document(const std::filesystem::path& dir, const char* file,
                                  const char* schema) {
  const std::filesystem::path path = dir / file;
  // A link whose target is gone (or a loop of links) is a file the user meant to be there:
  // read, it says why it cannot be.
  std::error_code error;
  if (!std::filesystem::exists(path, error) && !std::filesystem::is_symlink(path, error)) {
    return std::nullopt;
  }
  const std::string where = path.string();
  json doc = parse_json(read_file(where), where);
  try {
    check_schema(doc, schema, 1, /*required=*/true);
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(where + ": " + error.what());
  }
  return doc;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out;
  for (int64_t dim : shape) {
    if (!out.empty()) out += "\u00d7";
    out += std::to_string(dim);
  }
  return out;
}

// Flattens nested objects into dotted keys; strings as they are, everything else as JSON.
void flatten(const json& value, const std::string& prefix,
             std::vector<std::pair<std::string, std::string>>& out) {
  if (value.is_object()) {
    for (auto it = value.begin(); it != value.end(); ++it) {
      flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
    }
  } else if (value.is_null()) {
    return;  // e.g. gpu_name on a CPU run: nothing to show
  } else if (value.is_string()) {
    out.emplace_back(prefix, value.get<std::string>());
  } else if (value.is_array()) {
    std::string joined;
    for (const json& element : value) {
      if (!joined.empty()) joined += ", ";
      joined += element.is_string() ? element.get<std::string>() : element.dump();
    }
    out.emplace_back(prefix, joined);
  } else {
    out.emplace_back(prefix, value.dump());
  }
}

// The environment of the first document that has one, completed by the others' extra keys;
// the keys a reader looks for first come first.
std::vector<std::pair<std::string, std::string>> merged_environment(
    const std::vector<const json*>& documents) {
  std::vector<std::pair<std::string, std::string>> all;
  for (const json* doc : documents) {
    if (doc == nullptr || !doc->contains("environment")) continue;
    std::vector<std::pair<std::string, std::string>> entries;
    flatten((*doc)["environment"], "", entries);
    for (auto& entry : entries) {
      const bool seen = std::any_of(all.begin(), all.end(),
                                    [&](const auto& known) { return known.first == entry.first; });
      if (!seen) all.push_back(std::move(entry));
    }
  }
  static const char* const kFirst[] = {"date",
                                       "host",
                                       "hostname",
                                       "cpu_model",
                                       "cpu",
                                       "gpu_name",
                                       "gpu",
                                       "libtorch_version",
                                       "build_type",
                                       "git_commit",
                                       "intra_op_threads",
                                       "threads_per_stage"};
  auto rank = [](const std::string& key) {
    for (size_t i = 0; i < std::size(kFirst); ++i) {
      if (key == kFirst[i]) return i;
    }
    return std::size(kFirst);
  };
  std::stable_sort(all.begin(), all.end(),
                   [&](const auto& a, const auto& b) { return rank(a.first) < rank(b.first); });
  return all;
}

std::vector<double> busy_from_timeline(const pipeline::Timeline& timeline) {
  int stages = 0;
  for (const pipeline::TimedAction& t : timeline) stages = std::max(stages, t.stage + 1);
  return pipeline::busy_ms_per_stage(timeline, stages);
}

// Computed here rather than read from validation.json so that the definition the page states
// always holds, whichever tool wrote the file.
void fill_errors(ReportCandidate& candidate) {
  candidate.step_error = kNaN;
  candidate.speedup_error = kNaN;
  if (candidate.predicted && candidate.measured) {
    candidate.step_error =
        relative_error(candidate.predicted->step_ms, candidate.measured->step_ms);
    candidate.speedup_error =
        relative_error(candidate.predicted->speedup(), candidate.measured->speedup());
  }
}

// A prediction's busy time per step: its timeline's (recomputation included) when it has one,
// else its time per micro-batch times the micro-batch count.
std::vector<double> predicted_busy(const Estimate& predicted, int chunks) {
  if (!predicted.timeline.empty()) return busy_from_timeline(predicted.timeline);
  std::vector<double> busy;
  for (double ms : predicted.stage_ms) busy.push_back(ms * chunks);
  return busy;
}

// A measurement's busy time per step: as measured per stage, else from its timeline.
std::vector<double> measured_busy(const Estimate& measured) {
  return measured.stage_ms.empty() ? busy_from_timeline(measured.timeline) : measured.stage_ms;
}

ReportCandidate candidate_from_validation(const Candidate& c, int chunks) {
  ReportCandidate candidate;
  candidate.algorithms = c.algorithms;
  candidate.balance = c.balance;
  candidate.predicted = c.predicted;
  candidate.measured = c.measured;
  candidate.predicted_busy_ms = predicted_busy(c.predicted, chunks);
  candidate.measured_busy_ms = measured_busy(c.measured);
  fill_errors(candidate);
  return candidate;
}

ReportCandidate candidate_from_plan(const balance::Plan& plan) {
  ReportCandidate candidate;
  candidate.algorithms = {plan.algorithm};
  candidate.balance = plan.balance;
  Estimate side;
  side.step_ms = plan.prediction.step_ms;
  side.naive_step_ms = plan.prediction.naive_step_ms;
  for (const balance::StagePlan& stage : plan.stages) {
    side.stage_ms.push_back(stage.time_ms);
    side.stage_bytes.push_back(stage.timed_memory_bytes);
  }
  candidate.predicted_busy_ms = predicted_busy(side, std::max(plan.prediction.chunks, 1));
  candidate.predicted = std::move(side);
  return candidate;
}

Estimate measured_from_run(const RunRecord& run) {
  Estimate side;
  side.step_ms = run.median_step_ms;
  side.naive_step_ms = kNaN;
  side.timeline = run.timeline;
  for (const StageRun& stage : run.stages) {
    side.stage_ms.push_back(stage.busy_ms);
    side.stage_bytes.push_back(stage.peak_memory_bytes);
  }
  return side;
}

void add_measured_run(ReportCandidate& candidate, const RunRecord& run) {
  candidate.measured = measured_from_run(run);
  candidate.measured_busy_ms = measured_busy(*candidate.measured);
  fill_errors(candidate);
}

bool contains(const std::vector<std::string>& names, const char* name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// A balance the report draws over the profile's layers, and where a document gives it.
struct BalanceAt {
  std::string file;
  std::string field;
  const std::vector<int>* balance;  // null: the document is absent
};

// Every balance must cover the profile's layers exactly: documents of another model (or a
// profile replaced since) would draw stages over layers they never had.
void check_balances_cover(const balance::CostProfile& profile, const std::string& profile_file,
                          const std::vector<BalanceAt>& balances) {
  for (const BalanceAt& at : balances) {
    if (at.balance == nullptr) continue;
    int64_t layers = 0;
    for (const int n : *at.balance) layers += n;
    if (layers == static_cast<int64_t>(profile.layers.size())) continue;
    throw std::invalid_argument(fmt::format(
        "{}: {} [{}] covers {} layers, but {} has {}: are they of the same model and run?", at.file,
        at.field, fmt::join(*at.balance, ","), layers, profile_file, profile.layers.size()));
  }
}

// A model's documents name it alike: plan.json or run.json of another model (with as many layers)
// would be drawn as this one's. A TorchScript model is named by its path, which may differ where
// the file was moved (`train --plan ... --model NEWPATH`): its file name counts.
struct ModelAt {
  std::string file;
  const std::string* model;  // null: the document is absent
};

std::string model_identity(const std::string& model) {
  const size_t slash = model.rfind('/');
  return slash == std::string::npos ? model : model.substr(slash + 1);
}

void check_same_model(const std::vector<ModelAt>& documents) {
  const ModelAt* first = nullptr;
  for (const ModelAt& at : documents) {
    if (at.model == nullptr || at.model->empty()) continue;
    if (first == nullptr) {
      first = &at;
    } else if (model_identity(*at.model) != model_identity(*first->model)) {
      throw std::invalid_argument(
          fmt::format("{}: model {}, but {} is of {}: are they of the same model and run?", at.file,
                      quote(*at.model), first->file, quote(*first->model)));
    }
  }
}

}  // namespace

ReportInputs load_report_inputs(const std::string& dir) {
  const std::filesystem::path root(dir);
  std::error_code error;
  if (!std::filesystem::is_directory(root, error)) {
    throw std::invalid_argument(fmt::format("report: {} is not a directory{}", quote(dir),
                                            error ? ": " + error.message() : ""));
  }
  ReportInputs inputs;
  inputs.dir = dir;
  const auto load = [&](const char* file, const char* schema) {
    std::optional<nlohmann::json> doc = load_document(root, file, schema);
    if (doc) inputs.files.push_back((root / file).string());
    return doc;
  };
  inputs.profile = load("profile.json", "pipebal.profile");
  if (!inputs.profile) {  // validate --plans profiles only in turns with its runs
    inputs.profile = load("profile-in-turns.json", "pipebal.profile");
    if (inputs.profile) inputs.profile_file = "profile-in-turns.json";
  }
  for (const auto& [file, schema] :
       {std::pair{"plans-comparison.json", "pipebal.plans-comparison"},
        std::pair{"plan-validation.json", "pipebal.plan-validation"}}) {
    inputs.comparison = load(file, schema);
    if (inputs.comparison) {
      inputs.comparison_file = file;
      break;
    }
  }
  if (!inputs.profile && !inputs.comparison) {
    throw std::invalid_argument(fmt::format(
        "{}: missing (the report needs at least the profile; `pipebal validate -o {}` writes "
        "every file)",
        (root / "profile.json").string(), dir));
  }
  inputs.plan = load("plan.json", "pipebal.plan");
  inputs.run = load("run.json", "pipebal.run");
  inputs.validation = load("validation.json", "pipebal.validation");
  return inputs;
}

ReportData make_report_data(const ReportInputs& inputs) {
  if (!inputs.profile && !inputs.comparison) {
    throw std::invalid_argument("report: profile.json is required");
  }
  ReportData data;
  data.dir = inputs.dir;
  // Errors name the file as the user would find it.
  auto file = [&](const char* name) {
    return inputs.dir.empty() ? std::string(name)
                              : (std::filesystem::path(inputs.dir) / name).string();
  };
  const balance::CostProfile profile =
      inputs.profile
          ? balance::profile_from_json(*inputs.profile, file(inputs.profile_file.c_str()))
          : balance::CostProfile{};
  if (inputs.profile) {
    // The bounds `balance` holds a profile to: a time past them draws no chart.
    try {
      balance::validate_layer_costs(profile.layers);
    } catch (const std::invalid_argument& error) {
      throw std::invalid_argument(file(inputs.profile_file.c_str()) + ": " + error.what());
    }
  }
  if (inputs.comparison) {
    data.comparison =
        comparison_from_json(*inputs.comparison, file(inputs.comparison_file.c_str()));
  }
  const bool compared = !data.comparison.configurations.empty();
  std::optional<balance::Plan> plan;
  std::optional<RunRecord> run;
  std::optional<ValidationRecord> validation;
  if (inputs.plan) plan = balance::plan_from_json(*inputs.plan, file("plan.json"));
  if (inputs.run) run = run_from_json(*inputs.run, file("run.json"));
  if (inputs.validation)
    validation = validation_from_json(*inputs.validation, file("validation.json"));

  check_same_model({{file(inputs.profile_file.c_str()), inputs.profile ? &profile.model : nullptr},
                    {file("validation.json"), validation ? &validation->model : nullptr},
                    {file("plan.json"), plan ? &plan->model : nullptr},
                    {file("run.json"), run ? &run->model : nullptr},
                    {file(inputs.comparison_file.c_str()),
                     inputs.comparison ? &data.comparison.model : nullptr}});
  if (inputs.profile) {
    check_balances_cover(profile, file(inputs.profile_file.c_str()),
                         {{file("plan.json"), "balance", plan ? &plan->balance : nullptr},
                          {file("run.json"), "balance", run ? &run->balance : nullptr}});
    for (size_t k = 0; validation && k < validation->candidates.size(); ++k) {
      check_balances_cover(profile, file(inputs.profile_file.c_str()),
                           {{file("validation.json"), fmt::format("candidates[{}].balance", k),
                             &validation->candidates[k].balance}});
    }
    for (size_t k = 0; k < data.comparison.configurations.size(); ++k) {
      check_balances_cover(
          profile, file(inputs.profile_file.c_str()),
          {{file(inputs.comparison_file.c_str()),
            fmt::format("{}[{}].balance",
                        data.comparison.source == "validate --plans" ? "plans" : "configurations",
                        k),
            &data.comparison.configurations[k].balance}});
    }
  }
  data.layers = profile.layers;
  // The header: the most complete document first.
  if (validation) {
    data.model = validation->model;
    data.input_shape = shape_text(validation->input_shape);
    data.chunks = validation->chunks;
    data.schedule = validation->schedule;
    data.checkpoint = validation->checkpoint;
  }
  if (run) {
    if (data.model.empty()) data.model = run->model;
    if (data.input_shape.empty()) data.input_shape = shape_text(run->input_shape);
    if (data.chunks == 0) data.chunks = run->chunks;
    if (data.schedule.empty()) data.schedule = run->schedule;
    if (data.checkpoint.empty()) data.checkpoint = run->checkpoint;
  }
  if (plan) {
    if (data.model.empty()) data.model = plan->model;
    if (data.input_shape.empty()) data.input_shape = shape_text(plan->input_shape);
    if (data.chunks == 0) data.chunks = plan->chunks;
    if (data.schedule.empty()) data.schedule = pipeline::to_string(plan->schedule);
    if (data.checkpoint.empty()) data.checkpoint = pipeline::to_string(plan->checkpoint);
  }
  if (data.model.empty()) data.model = data.comparison.model;
  if (data.input_shape.empty()) data.input_shape = shape_text(data.comparison.input_shape);
  if (data.model.empty()) data.model = profile.model.empty() ? "(unnamed model)" : profile.model;
  if (data.input_shape.empty() && !profile.input_shape.empty()) {
    data.input_shape = shape_text(profile.input_shape);
  }
  data.device = profile.device;
  data.profile_backend = profile.backend;
  data.environment = merged_environment({inputs.validation ? &*inputs.validation : nullptr,
                                         inputs.run ? &*inputs.run : nullptr,
                                         inputs.comparison ? &*inputs.comparison : nullptr,
                                         inputs.profile ? &*inputs.profile : nullptr});
  data.samples_per_s = kNaN;

  if (validation) {
    const int chunks = std::max(data.chunks, 1);
    for (const Candidate& c : validation->candidates) {
      data.candidates.push_back(candidate_from_validation(c, chunks));
    }
    data.stages = validation->stages;
    data.steps = validation->steps;
  } else {
    if (!compared) {
      data.notes.push_back(
          "validation.json is missing: no comparison of candidate balances and no predicted "
          "timeline. `pipebal validate ... -o DIR` writes it.");
    }
    std::optional<ReportCandidate> from_plan;
    if (plan) from_plan = candidate_from_plan(*plan);
    if (run) {
      if (from_plan && from_plan->balance == run->balance) {
        add_measured_run(*from_plan, *run);
      } else {
        ReportCandidate measured;
        measured.algorithms = {"run"};
        measured.balance = run->balance;
        add_measured_run(measured, *run);
        data.candidates.push_back(std::move(measured));
      }
    }
    if (from_plan && !run && data.comparison.source == "validate --auto") {
      // validate --auto keeps no run.json: the plan is the recommended configuration, measured
      // in the comparison.
      for (const ComparedConfiguration& c : data.comparison.configurations) {
        if (c.balance != from_plan->balance || c.name.find("recommended") == std::string::npos) {
          continue;
        }
        Estimate measured;
        measured.step_ms = c.measured_ms;
        measured.naive_step_ms = kNaN;
        from_plan->measured = std::move(measured);
        break;
      }
    }
    if (from_plan) {
      fill_errors(*from_plan);
      data.candidates.insert(data.candidates.begin(), std::move(*from_plan));
    }
  }
  if (!inputs.profile) {
    data.notes.push_back(
        "No profile: the layers are not drawn. `pipebal validate --plans "
        "--profile-in-turns` writes one (profile-in-turns.json).");
  }
  if (!plan) {
    if (!compared) data.notes.push_back("plan.json is missing: memory caps are not drawn.");
  } else {
    for (const balance::StagePlan& stage : plan->stages) {
      data.memory_cap_bytes.push_back(stage.memory_cap_bytes == balance::kUnlimitedBytes
                                          ? kNaN
                                          : static_cast<double>(stage.memory_cap_bytes));
    }
  }
  if (!run) {
    if (!compared) {
      data.notes.push_back("run.json is missing: no per-step training measurements.");
    }
  } else {
    for (const StepSample& step : run->steps) data.run_steps.emplace_back(step.ms, step.loss);
    data.samples_per_s = run->samples_per_s;
    if (data.steps == 0) data.steps = static_cast<int>(data.run_steps.size());
  }
  if (data.candidates.empty() && !compared) {
    data.notes.push_back("Only the profile is present: there is no balance to compare.");
  }

  // The candidate drawn in full: what the plan chose, else dp's, else the first.
  std::optional<size_t> by_plan, by_dp;
  for (size_t i = 0; i < data.candidates.size(); ++i) {
    if (plan && !by_plan && data.candidates[i].balance == plan->balance) by_plan = i;
    if (!by_dp && contains(data.candidates[i].algorithms, "dp")) by_dp = i;
  }
  data.primary = by_plan.value_or(by_dp.value_or(0));
  if (data.stages == 0 && !data.candidates.empty()) {
    data.stages = static_cast<int>(data.candidates[data.primary].balance.size());
  }
  return data;
}

}  // namespace pipebal::reports
