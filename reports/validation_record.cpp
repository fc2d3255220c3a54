// See validation_record.h.
#include "reports/validation_record.h"

#include <limits>

#include "common/schema.h"
#include "reports/run_record.h"

namespace pipebal::reports {
namespace {

nlohmann::json bytes_json(const std::vector<int64_t>& bytes) {
  nlohmann::json out = nlohmann::json::array();
  for (int64_t b : bytes) out.push_back(b >= 0 ? nlohmann::json(b) : nlohmann::json());
  return out;
}

}  // namespace

double relative_error(double predicted, double measured) {
  return measured > 0 ? (predicted - measured) / measured
                      : std::numeric_limits<double>::quiet_NaN();
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

}  // namespace pipebal::reports
