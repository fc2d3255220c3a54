// What the HTML report shows, read from a validation directory: the raw JSON documents
// (ReportInputs) and what the report is drawn from (ReportData), built from the documents' typed
// records — validation.json when present, else plan.json and run.json — each read by the one
// reader of its schema (profile_from_json, plan_from_json, run_from_json, validation_from_json).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipebal/balance/layer_cost.h"
#include "pipebal/reports/comparison_record.h"
#include "pipebal/reports/validation_record.h"

namespace pipebal::reports {

// The documents of one directory, already schema-checked. The report needs the profile or a
// comparison; the others are rendered when present and named as missing otherwise.
struct ReportInputs {
  std::string dir;                        // where they came from; used in notes and error messages
  std::optional<nlohmann::json> profile;  // pipebal.profile/1
  std::string profile_file = "profile.json";  // or profile-in-turns.json (validate --plans)
  std::optional<nlohmann::json> plan;         // pipebal.plan/1
  std::optional<nlohmann::json> run;          // pipebal.run/1
  std::optional<nlohmann::json> validation;   // pipebal.validation/1
  // pipebal.plans-comparison/1 (validate --plans) or pipebal.plan-validation/1 (--auto).
  std::optional<nlohmann::json> comparison;
  std::string comparison_file;
  std::vector<std::string> files;  // the paths of the documents read, in that order
};

// Reads DIR/profile.json (else profile-in-turns.json), plan.json, run.json, validation.json and
// plans-comparison.json or plan-validation.json. Throws std::invalid_argument with one line
// naming the directory or file when DIR is not a directory, neither a profile nor a comparison
// is there, a file is not valid JSON, or its schema is not a supported major version.
ReportInputs load_report_inputs(const std::string& dir);

// A balance the report compares, with the algorithms that chose it: its prediction and its
// measurement as the documents give them (either may be absent), and each side's busy time per
// stage in one step, the quantity the page compares (a prediction gives time per micro-batch).
struct ReportCandidate {
  std::vector<std::string> algorithms;
  std::vector<int> balance;
  std::optional<Estimate> predicted;
  std::optional<Estimate> measured;
  std::vector<double> predicted_busy_ms;  // per stage, per step; empty when unknown
  std::vector<double> measured_busy_ms;
  double step_error = 0;     // (predicted - measured) / measured; NaN when unknown
  double speedup_error = 0;  // likewise for the speed-up
};

struct ReportData {
  std::string dir;
  std::string model;
  std::string input_shape;  // "32x3x64x64"
  int stages = 0;
  int chunks = 0;
  std::string schedule;
  std::string checkpoint;
  int steps = 0;
  std::string device;
  std::string profile_backend;
  // Key/value context (date, host, CPU, LibTorch, git commit, ...), well-known keys first.
  std::vector<std::pair<std::string, std::string>> environment;
  std::vector<balance::LayerCost> layers;  // the profile's, in order (a layer's index is its place)
  std::vector<ReportCandidate> candidates;
  size_t primary = 0;  // the candidate drawn in full: the plan's balance, else dp's, else first
  // Configurations trained side by side (validate --plans or --auto); empty: none.
  Comparison comparison;
  std::vector<double> memory_cap_bytes;              // per stage; empty or NaN entries: no cap
  std::vector<std::pair<double, double>> run_steps;  // (ms, loss) per training step
  double samples_per_s = 0;                          // NaN when unknown
  std::vector<std::string> notes;                    // what is missing, in plain words
};

// Builds the report's data. Throws std::invalid_argument naming the file and field when
// neither a profile nor a comparison is given or a document does not read (a field missing,
// mistyped or out of range).
ReportData make_report_data(const ReportInputs& inputs);

}  // namespace pipebal::reports
