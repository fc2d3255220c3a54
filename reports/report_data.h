// What the HTML report shows, read from a validation directory: the raw JSON documents
// (ReportInputs) and the plain structs the report is drawn from (ReportData), built from
// validation.json when present, else from plan.json and run.json.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace pipebal::reports {

// The documents of one directory, already schema-checked. profile is required by the report;
// the others are rendered when present and named as missing otherwise.
struct ReportInputs {
  std::string dir;                        // where they came from; used in notes and error messages
  std::optional<nlohmann::json> profile;  // pipebal.profile/1
  std::optional<nlohmann::json> plan;     // pipebal.plan/1
  std::optional<nlohmann::json> run;      // pipebal.run/1
  std::optional<nlohmann::json> validation;  // pipebal.validation/1
};

// Reads DIR/profile.json, plan.json, run.json and validation.json. Throws std::invalid_argument
// with one line naming the directory or file when DIR is not a directory, profile.json is
// missing, a file is not valid JSON, or its schema is not a supported major version.
ReportInputs load_report_inputs(const std::string& dir);

struct LayerRow {
  int index = 0;
  std::string name;
  std::string type;
  double forward_ms = 0;
  double backward_ms = 0;
  int64_t param_bytes = 0;
  int64_t activation_bytes = 0;
  int64_t output_bytes = 0;
};

struct ReportAction {
  int stage = 0;
  char action = 'F';  // F, R or B
  int micro_batch = 0;
  double start_ms = 0;
  double end_ms = 0;
};

// One side (predicted or measured) of a candidate. Missing numbers are NaN, missing per-stage
// lists are empty.
struct ReportEstimate {
  double step_ms = 0;
  double naive_step_ms = 0;
  double speedup = 0;
  std::vector<double> stage_busy_ms;       // per step
  std::vector<double> stage_memory_bytes;  // predicted memory or measured peak
  std::vector<ReportAction> timeline;
};

// A balance the report compares, with the algorithms that chose it.
struct ReportCandidate {
  std::vector<std::string> algorithms;
  std::vector<int> balance;
  std::optional<ReportEstimate> predicted;
  std::optional<ReportEstimate> measured;
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
  std::vector<LayerRow> layers;
  std::vector<ReportCandidate> candidates;
  size_t primary = 0;  // the candidate drawn in full: the plan's balance, else dp's, else first
  std::vector<double> memory_cap_bytes;              // per stage; empty or NaN entries: no cap
  std::vector<std::pair<double, double>> run_steps;  // (ms, loss) per training step
  double samples_per_s = 0;                          // NaN when unknown
  std::vector<std::string> notes;                    // what is missing, in plain words
};

// Builds the report's data. Throws std::invalid_argument naming the file and field when
// profile is absent or a field the report needs is missing or mistyped.
ReportData make_report_data(const ReportInputs& inputs);

}  // namespace pipebal::reports
