// What the report reads of a comparison of configurations trained side by side: `pipebal
// validate --plans` (pipebal.plans-comparison/1) and `pipebal validate --auto`
// (pipebal.plan-validation/1). Torch-free, like every document reader of the report.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pipebal::reports {

struct ComparedConfiguration {
  std::string name;           // the plan's file, or the configuration's labels
  std::string configuration;  // "1f1b, 8 micro-batches, checkpoint never", ...
  std::vector<int> balance;
  double predicted_ms = 0;
  double measured_ms = 0;
  double predicted_in_turns_ms = 0;  // NaN when not profiled in turns
  int predicted_rank = 0;            // among the configurations compared, 1: fastest
  int measured_rank = 0;
  double predicted_peak_bytes = 0;  // the busiest device's; NaN when the document does not say
  double measured_peak_bytes = 0;
};

struct Comparison {
  std::string source;  // "validate --plans" or "validate --auto"
  std::string model;
  std::vector<int64_t> input_shape;
  std::vector<ComparedConfiguration> configurations;  // in the document's order
};

// Reads either document (told apart by its schema). Throws std::invalid_argument "FILE:
// path.to.field ..." for a field that is missing, mistyped or out of range.
Comparison comparison_from_json(const nlohmann::json& doc, const std::string& file);

}  // namespace pipebal::reports
