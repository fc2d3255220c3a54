// See validation_record.h.
#include "pipebal/reports/validation_record.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "pipebal/common/json_reader.h"
#include "pipebal/common/schema.h"
#include "pipebal/reports/run_record.h"

namespace pipebal::reports {
namespace {

nlohmann::json bytes_json(const std::vector<int64_t>& bytes) {
  nlohmann::json out = nlohmann::json::array();
  for (int64_t b : bytes) out.push_back(b >= 0 ? nlohmann::json(b) : nlohmann::json());
  return out;
}

std::vector<int64_t> bytes_from_json(const JsonReader& bytes) {
  std::vector<int64_t> out;
  for (const JsonReader& b : bytes.elements()) out.push_back(b.is_null() ? -1 : b.integer(0));
  return out;
}

// One side of a candidate; `stage_key` and `bytes_key` are the side's names for its per-stage
// times and memory. Absent optional parts stay empty; an unknown naive time is NaN.
Estimate estimate_from_json(const JsonReader& side, const char* stage_key, const char* bytes_key,
                            int stages) {
  Estimate estimate;
  estimate.step_ms = read_ms(side.at("step_ms"));
  estimate.naive_step_ms = read_ms_or_nan(side, "naive_step_ms");
  if (side.has(stage_key)) {
    for (const JsonReader& ms : side.at(stage_key).elements()) {
      estimate.stage_ms.push_back(ms.is_null() ? std::numeric_limits<double>::quiet_NaN()
                                               : read_ms(ms));
    }
  }
  if (side.has(bytes_key)) estimate.stage_bytes = bytes_from_json(side.at(bytes_key));
  if (side.has("timeline")) estimate.timeline = timeline_from_json(side.at("timeline"), stages);
  return estimate;
}

}  // namespace

double relative_error(double predicted, double measured) {
  return measured > 0 ? (predicted - measured) / measured
                      : std::numeric_limits<double>::quiet_NaN();
}

std::vector<int> ranks_by_time(const std::vector<double>& step_ms) {
  std::vector<size_t> order(step_ms.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::llround(step_ms[a] * 1e6) < std::llround(step_ms[b] * 1e6);
  });
  std::vector<int> rank(step_ms.size());
  for (size_t k = 0; k < order.size(); ++k) rank[order[k]] = static_cast<int>(k) + 1;
  return rank;
}

double median_ratio_by_round(const std::vector<double>& a_steps_ms,
                             const std::vector<double>& b_steps_ms) {
  std::vector<double> ratios;
  for (size_t k = 0; k < std::min(a_steps_ms.size(), b_steps_ms.size()); ++k) {
    if (a_steps_ms[k] > 0 && b_steps_ms[k] > 0) ratios.push_back(a_steps_ms[k] / b_steps_ms[k]);
  }
  if (ratios.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(ratios.begin(), ratios.end());
  const size_t half = ratios.size() / 2;
  return ratios.size() % 2 ? ratios[half] : (ratios[half - 1] + ratios[half]) / 2;
}

double Candidate::step_error() const {
  return relative_error(predicted.step_ms, measured.step_ms);
}

double Candidate::speedup_error() const {
  return relative_error(predicted.speedup(), measured.speedup());
}

nlohmann::json validation_to_json(const ValidationRecord& record) {
  nlohmann::json candidates = nlohmann::json::array();
  for (const auto& c : record.candidates) {
    candidates.push_back({{"algorithms", c.algorithms},
                          {"balance", c.balance},
                          {"predicted",
                           {{"step_ms", c.predicted.step_ms},
                            {"naive_step_ms", c.predicted.naive_step_ms},
                            {"speedup", c.predicted.speedup()},
                            {"bottleneck_ms", c.bottleneck_ms},
                            {"stage_time_ms", c.predicted.stage_ms},
                            {"stage_memory_bytes", bytes_json(c.predicted.stage_bytes)},
                            {"timeline", timeline_to_json(c.predicted.timeline)}}},
                          {"measured",
                           {{"step_ms", c.measured.step_ms},
                            {"naive_step_ms", c.measured.naive_step_ms},
                            {"speedup", c.measured.speedup()},
                            {"stage_busy_ms", c.measured.stage_ms},
                            {"stage_peak_bytes", bytes_json(c.measured.stage_bytes)},
                            {"timeline", timeline_to_json(c.measured.timeline)}}},
                          {"step_error", c.step_error()},
                          {"speedup_error", c.speedup_error()}});
  }
  return {{"schema", schema_tag("pipebal.validation", 1)},
          {"model", record.model},
          {"input_shape", record.input_shape},
          {"stages", record.stages},
          {"chunks", record.chunks},
          {"schedule", record.schedule},
          {"checkpoint", record.checkpoint},
          {"steps", record.steps},
          {"candidates", candidates},
          {"environment", record.environment}};
}

ValidationRecord validation_from_json(const nlohmann::json& doc, const std::string& file) {
  try {
    check_schema(doc, "pipebal.validation", 1, /*required=*/true);
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(file + ": " + error.what());
  }
  const JsonReader r(doc, file);
  ValidationRecord record;
  record.model = r.get_or<std::string>("model", "");
  record.input_shape = r.get_or<std::vector<int64_t>>("input_shape", {});
  record.stages =
      static_cast<int>(r.has("stages") ? r.at("stages").integer(0, kMaxTimelineStages) : 0);
  record.chunks =
      static_cast<int>(r.has("chunks") ? r.at("chunks").integer(1, kMaxTimelineMicroBatches) : 0);
  record.schedule = r.get_or<std::string>("schedule", "");
  record.checkpoint = r.get_or<std::string>("checkpoint", "");
  record.steps = static_cast<int>(r.has("steps") ? r.at("steps").integer(0, INT32_MAX) : 0);
  for (const JsonReader& c : r.at("candidates").elements()) {
    Candidate candidate;
    if (c.has("algorithms")) {
      candidate.algorithms = c.get<std::vector<std::string>>("algorithms");
    } else if (c.has("algorithm")) {  // one name, as a hand-written file may say it
      candidate.algorithms = {c.get<std::string>("algorithm")};
    }
    for (const int64_t layers : c.at("balance").integers(1, INT32_MAX))
      candidate.balance.push_back(static_cast<int>(layers));
    if (candidate.balance.empty()) c.at("balance").fail("is empty");
    const JsonReader predicted = c.at("predicted");
    candidate.bottleneck_ms =
        predicted.has("bottleneck_ms") ? read_ms(predicted.at("bottleneck_ms")) : 0;
    const int stages =
        static_cast<int>(std::min<size_t>(candidate.balance.size(), kMaxTimelineStages));
    candidate.predicted =
        estimate_from_json(predicted, "stage_time_ms", "stage_memory_bytes", stages);
    candidate.measured =
        estimate_from_json(c.at("measured"), "stage_busy_ms", "stage_peak_bytes", stages);
    // Per-stage numbers, where given, are one per stage of the balance: the page draws a bar each.
    const auto per_stage = [&](const char* side, const char* key, size_t count) {
      if (count != 0 && count != candidate.balance.size()) {
        c.at(side).at(key).fail(
            fmt::format("has {} entries for {} stages", count, candidate.balance.size()));
      }
    };
    per_stage("predicted", "stage_time_ms", candidate.predicted.stage_ms.size());
    per_stage("predicted", "stage_memory_bytes", candidate.predicted.stage_bytes.size());
    per_stage("measured", "stage_busy_ms", candidate.measured.stage_ms.size());
    per_stage("measured", "stage_peak_bytes", candidate.measured.stage_bytes.size());
    record.candidates.push_back(std::move(candidate));
  }
  if (r.has("environment")) record.environment = r.at("environment").value();
  return record;
}

}  // namespace pipebal::reports
