// See report_data.h. Every field is read through JsonNode so a missing or mistyped value is
// reported as "FILE: path.to.field ..." — the report's inputs may be hand-written.
#include "reports/report_data.h"
#include "reports/validation_record.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "common/atomic_file.h"
#include "common/schema.h"

namespace pipebal::reports {
namespace {

using nlohmann::json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A value inside one file, with the path that leads to it, for error messages.
class JsonNode {
 public:
  JsonNode(const json& value, std::string file, std::string path)
      : value_(&value), file_(std::move(file)), path_(std::move(path)) {}

  const json& value() const { return *value_; }
  bool has(const char* key) const {
    return value_->is_object() && value_->contains(key) && !(*value_)[key].is_null();
  }

  JsonNode at(const char* key) const {
    if (!value_->is_object()) fail("is not an object");
    const auto it = value_->find(key);
    if (it == value_->end()) {
      throw std::invalid_argument(fmt::format("{}: missing \"{}\"{}", file_, child_path(key),
                                              path_.empty() ? "" : " in " + path_));
    }
    return JsonNode(*it, file_, child_path(key));
  }

  std::vector<JsonNode> elements() const {
    if (!value_->is_array()) fail("must be an array");
    std::vector<JsonNode> out;
    for (size_t i = 0; i < value_->size(); ++i) {
      out.emplace_back((*value_)[i], file_, fmt::format("{}[{}]", path_, i));
    }
    return out;
  }

  template <typename T>
  T as() const {
    // nlohmann converts between number kinds silently but throws for strings vs numbers.
    try {
      return value_->get<T>();
    } catch (const json::exception&) {
      fail(fmt::format("has the wrong type ({})", value_->type_name()));
    }
  }

  template <typename T>
  T get(const char* key) const {
    return at(key).as<T>();
  }
  template <typename T>
  T get_or(const char* key, T fallback) const {
    return has(key) ? get<T>(key) : fallback;
  }
  double number_or_nan(const char* key) const { return get_or<double>(key, kNaN); }

  // null elements (e.g. memory that was not measured) become NaN.
  std::vector<double> numbers_or_empty(const char* key) const {
    std::vector<double> out;
    if (!has(key)) return out;
    for (const JsonNode& element : at(key).elements()) {
      out.push_back(element.value().is_null() ? kNaN : element.as<double>());
    }
    return out;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument(
        fmt::format("{}: {} {}", file_, path_.empty() ? "document" : path_, what));
  }

 private:
  std::string child_path(const char* key) const { return path_.empty() ? key : path_ + "." + key; }

  const json* value_;
  std::string file_;
  std::string path_;
};

std::optional<json> load_document(const std::filesystem::path& dir, const char* file,
                                  const char* schema) {
  const std::filesystem::path path = dir / file;
  if (!std::filesystem::exists(path)) return std::nullopt;
  const std::string where = path.string();
  json doc = parse_json(read_file(where), where);
  try {
    check_schema(doc, schema, 1, /*required=*/true);
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(where + ": " + error.what());
  }
  return doc;
}

std::string shape_text(const JsonNode& shape) {
  std::string out;
  for (const JsonNode& dim : shape.elements()) {
    if (!out.empty()) out += "\u00d7";
    out += std::to_string(dim.as<int64_t>());
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

// Far beyond any pipeline pipebal runs (pipeline::kMaxStages, pipeline::kMaxChunks).
constexpr int kMaxReportStages = 4096;
constexpr int kMaxReportMicroBatches = 1 << 16;

std::vector<ReportAction> read_timeline(const JsonNode& owner) {
  std::vector<ReportAction> out;
  if (!owner.has("timeline")) return out;
  for (const JsonNode& node : owner.at("timeline").elements()) {
    ReportAction entry;
    entry.stage = node.get<int>("stage");
    // The page draws one row per stage: an absurd index must not size it.
    if (entry.stage < 0 || entry.stage >= kMaxReportStages) {
      node.at("stage").fail(fmt::format("is {}, expected a stage index from 0 to {}", entry.stage,
                                        kMaxReportStages - 1));
    }
    const std::string action = node.get<std::string>("action");
    if (action != "F" && action != "R" && action != "B") {
      node.at("action").fail(fmt::format("is \"{}\", expected \"F\", \"R\" or \"B\"", action));
    }
    entry.action = action[0];
    entry.micro_batch = node.get<int>("micro_batch");
    if (entry.micro_batch < 0 || entry.micro_batch >= kMaxReportMicroBatches) {
      node.at("micro_batch")
          .fail(fmt::format("is {}, expected a micro-batch index from 0 to {}", entry.micro_batch,
                            kMaxReportMicroBatches - 1));
    }
    entry.start_ms = node.get<double>("start_ms");
    entry.end_ms = node.get<double>("end_ms");
    out.push_back(entry);
  }
  return out;
}

std::vector<double> busy_from_timeline(const std::vector<ReportAction>& timeline) {
  std::vector<double> busy;
  for (const ReportAction& entry : timeline) {
    if (entry.stage < 0) continue;
    if (static_cast<size_t>(entry.stage) >= busy.size()) busy.resize(entry.stage + 1, 0.0);
    busy[entry.stage] += entry.end_ms - entry.start_ms;
  }
  return busy;
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
        relative_error(candidate.predicted->speedup, candidate.measured->speedup);
  }
}

ReportCandidate candidate_from_validation(const JsonNode& node, int chunks) {
  ReportCandidate candidate;
  if (node.has("algorithms")) {
    candidate.algorithms = node.get<std::vector<std::string>>("algorithms");
  } else if (node.has("algorithm")) {
    candidate.algorithms = {node.get<std::string>("algorithm")};
  }
  candidate.balance = node.get<std::vector<int>>("balance");
  if (node.has("predicted")) {
    const JsonNode p = node.at("predicted");
    ReportEstimate side;
    side.step_ms = p.get<double>("step_ms");
    side.naive_step_ms = p.number_or_nan("naive_step_ms");
    side.speedup = p.number_or_nan("speedup");
    side.timeline = read_timeline(p);
    side.stage_busy_ms = busy_from_timeline(side.timeline);
    if (side.stage_busy_ms.empty()) {
      // stage_time_ms is per micro-batch; the chart compares busy time per step.
      for (double ms : p.numbers_or_empty("stage_time_ms"))
        side.stage_busy_ms.push_back(ms * chunks);
    }
    side.stage_memory_bytes = p.numbers_or_empty("stage_memory_bytes");
    candidate.predicted = std::move(side);
  }
  if (node.has("measured")) {
    const JsonNode m = node.at("measured");
    ReportEstimate side;
    side.step_ms = m.get<double>("step_ms");
    side.naive_step_ms = m.number_or_nan("naive_step_ms");
    side.speedup = m.number_or_nan("speedup");
    side.timeline = read_timeline(m);
    side.stage_busy_ms = m.numbers_or_empty("stage_busy_ms");
    if (side.stage_busy_ms.empty()) side.stage_busy_ms = busy_from_timeline(side.timeline);
    side.stage_memory_bytes = m.numbers_or_empty("stage_peak_bytes");
    candidate.measured = std::move(side);
  }
  fill_errors(candidate);
  return candidate;
}

ReportCandidate candidate_from_plan(const JsonNode& plan) {
  ReportCandidate candidate;
  candidate.algorithms = {plan.get<std::string>("algorithm")};
  candidate.balance = plan.get<std::vector<int>>("balance");
  const JsonNode prediction = plan.at("prediction");
  ReportEstimate side;
  side.step_ms = prediction.get<double>("step_ms");
  side.naive_step_ms = prediction.number_or_nan("naive_step_ms");
  side.speedup = prediction.number_or_nan("speedup");
  const int chunks = prediction.get_or<int>("chunks", plan.get_or<int>("chunks", 1));
  for (const JsonNode& stage : plan.at("stages").elements()) {
    side.stage_busy_ms.push_back(stage.get<double>("time_ms") * chunks);
    side.stage_memory_bytes.push_back(stage.get<double>("memory_bytes"));
  }
  candidate.predicted = std::move(side);
  return candidate;
}

ReportEstimate measured_from_run(const JsonNode& run) {
  ReportEstimate side;
  side.step_ms = run.get<double>("median_step_ms");
  side.naive_step_ms = kNaN;
  side.speedup = kNaN;
  side.timeline = read_timeline(run);
  if (run.has("stages")) {
    for (const JsonNode& stage : run.at("stages").elements()) {
      side.stage_busy_ms.push_back(stage.number_or_nan("busy_ms"));
      side.stage_memory_bytes.push_back(stage.number_or_nan("peak_memory_bytes"));
    }
  }
  if (side.stage_busy_ms.empty()) side.stage_busy_ms = busy_from_timeline(side.timeline);
  return side;
}

bool contains(const std::vector<std::string>& names, const char* name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

ReportInputs load_report_inputs(const std::string& dir) {
  const std::filesystem::path root(dir);
  if (!std::filesystem::is_directory(root)) {
    throw std::invalid_argument(fmt::format("report: '{}' is not a directory", dir));
  }
  ReportInputs inputs;
  inputs.dir = dir;
  inputs.profile = load_document(root, "profile.json", "pipebal.profile");
  if (!inputs.profile) {
    throw std::invalid_argument(fmt::format(
        "{}: missing (the report needs at least the profile; `pipebal validate -o {}` writes "
        "every file)",
        (root / "profile.json").string(), dir));
  }
  inputs.plan = load_document(root, "plan.json", "pipebal.plan");
  inputs.run = load_document(root, "run.json", "pipebal.run");
  inputs.validation = load_document(root, "validation.json", "pipebal.validation");
  return inputs;
}

ReportData make_report_data(const ReportInputs& inputs) {
  if (!inputs.profile) throw std::invalid_argument("report: profile.json is required");
  ReportData data;
  data.dir = inputs.dir;
  // Errors name the file as the user would find it.
  auto file = [&](const char* name) {
    return inputs.dir.empty() ? std::string(name)
                              : (std::filesystem::path(inputs.dir) / name).string();
  };
  const JsonNode profile(*inputs.profile, file("profile.json"), "");
  std::optional<JsonNode> plan, run, validation;
  if (inputs.plan) plan.emplace(*inputs.plan, file("plan.json"), "");
  if (inputs.run) run.emplace(*inputs.run, file("run.json"), "");
  if (inputs.validation) validation.emplace(*inputs.validation, file("validation.json"), "");

  for (const JsonNode& node : profile.at("layers").elements()) {
    LayerRow row;
    row.index = node.get_or<int>("index", static_cast<int>(data.layers.size()));
    row.name = node.get_or<std::string>("name", "");
    row.type = node.get_or<std::string>("type", "");
    row.forward_ms = node.get<double>("forward_ms");
    row.backward_ms = node.get<double>("backward_ms");
    row.param_bytes = node.get_or<int64_t>("param_bytes", 0);
    row.activation_bytes = node.get_or<int64_t>("activation_bytes", 0);
    row.output_bytes = node.get_or<int64_t>("output_bytes", 0);
    data.layers.push_back(row);
  }

  // The header: the most complete document first.
  for (const std::optional<JsonNode>* doc : {&validation, &run, &plan}) {
    if (!*doc) continue;
    const JsonNode& node = **doc;
    if (data.model.empty()) data.model = node.get_or<std::string>("model", "");
    if (data.input_shape.empty() && node.has("input_shape")) {
      data.input_shape = shape_text(node.at("input_shape"));
    }
    if (data.chunks == 0) data.chunks = node.get_or<int>("chunks", 0);
    if (data.schedule.empty()) data.schedule = node.get_or<std::string>("schedule", "");
    if (data.checkpoint.empty()) data.checkpoint = node.get_or<std::string>("checkpoint", "");
  }
  if (data.model.empty()) data.model = profile.get_or<std::string>("model", "(unnamed model)");
  if (data.input_shape.empty() && profile.has("input_shapes")) {
    for (const JsonNode& shape : profile.at("input_shapes").elements()) {
      if (!data.input_shape.empty()) data.input_shape += ", ";
      data.input_shape += shape_text(shape) + " (profiled micro-batch)";
    }
  }
  data.device = profile.get_or<std::string>("device", "");
  data.profile_backend = profile.get_or<std::string>("backend", "");
  data.environment = merged_environment({inputs.validation ? &*inputs.validation : nullptr,
                                         inputs.run ? &*inputs.run : nullptr, &*inputs.profile});
  data.samples_per_s = kNaN;

  if (validation) {
    const int chunks = std::max(data.chunks, 1);
    for (const JsonNode& node : validation->at("candidates").elements()) {
      data.candidates.push_back(candidate_from_validation(node, chunks));
    }
    data.stages = validation->get_or<int>("stages", 0);
    if (data.stages < 0 || data.stages > kMaxReportStages) {
      validation->at("stages").fail(
          fmt::format("is {}, expected 0 to {}", data.stages, kMaxReportStages));
    }
    data.steps = validation->get_or<int>("steps", 0);
  } else {
    data.notes.push_back(
        "validation.json is missing: no comparison of candidate balances and no predicted "
        "timeline. `pipebal validate ... -o DIR` writes it.");
    std::optional<ReportCandidate> from_plan;
    if (plan) from_plan = candidate_from_plan(*plan);
    if (run) {
      const std::vector<int> balance = run->get<std::vector<int>>("balance");
      if (from_plan && from_plan->balance == balance) {
        from_plan->measured = measured_from_run(*run);
      } else {
        ReportCandidate measured;
        measured.algorithms = {"run"};
        measured.balance = balance;
        measured.measured = measured_from_run(*run);
        fill_errors(measured);
        data.candidates.push_back(std::move(measured));
      }
    }
    if (from_plan) {
      fill_errors(*from_plan);
      data.candidates.insert(data.candidates.begin(), std::move(*from_plan));
    }
  }
  if (!plan) {
    data.notes.push_back("plan.json is missing: memory caps are not drawn.");
  } else {
    for (const JsonNode& stage : plan->at("stages").elements()) {
      data.memory_cap_bytes.push_back(stage.number_or_nan("memory_cap_bytes"));
    }
  }
  if (!run) {
    data.notes.push_back("run.json is missing: no per-step training measurements.");
  } else {
    if (run->has("steps")) {
      for (const JsonNode& step : run->at("steps").elements()) {
        data.run_steps.emplace_back(step.get<double>("ms"), step.number_or_nan("loss"));
      }
    }
    data.samples_per_s = run->number_or_nan("samples_per_s");
    if (data.steps == 0) data.steps = static_cast<int>(data.run_steps.size());
  }
  if (data.candidates.empty()) {
    data.notes.push_back("Only the profile is present: there is no balance to compare.");
  }

  // The candidate drawn in full: what the plan chose, else dp's, else the first.
  std::optional<size_t> by_plan, by_dp;
  const std::vector<int> plan_balance =
      plan ? plan->get<std::vector<int>>("balance") : std::vector<int>();
  for (size_t i = 0; i < data.candidates.size(); ++i) {
    if (plan && !by_plan && data.candidates[i].balance == plan_balance) by_plan = i;
    if (!by_dp && contains(data.candidates[i].algorithms, "dp")) by_dp = i;
  }
  data.primary = by_plan.value_or(by_dp.value_or(0));
  if (data.stages == 0 && !data.candidates.empty()) {
    data.stages = static_cast<int>(data.candidates[data.primary].balance.size());
  }
  return data;
}

}  // namespace pipebal::reports
