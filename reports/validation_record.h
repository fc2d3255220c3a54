// The `pipebal.validation/1` document: for each candidate balance, the predicted and the
// measured step time and speed-up over naive model parallelism (one micro-batch).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipebal/pipeline/timeline.h"

namespace pipebal::reports {

struct Estimate {
  double step_ms = 0;                // `chunks` micro-batches
  double naive_step_ms = 0;          // same balance, one micro-batch
  std::vector<double> stage_ms;      // predicted: time per micro-batch; measured: busy per step
  std::vector<int64_t> stage_bytes;  // predicted memory / measured peak (-1: not measured)
  pipeline::Timeline timeline;

  double speedup() const { return step_ms > 0 ? naive_step_ms / step_ms : 0; }
};

// The prediction's error relative to the measurement, (predicted - measured) / measured; NaN
// when nothing positive was measured. The one definition the CLI, validation.json and the
// report use.
double relative_error(double predicted, double measured);

// Each time's rank among `step_ms`, 1 for the smallest. Times equal to a nanosecond are ties that
// keep the list's order: the same costs summed in another order differ in their last bits, and
// must not rank a later entry above an earlier one.
std::vector<int> ranks_by_time(const std::vector<double>& step_ms);

// How much slower run a stepped than run b, measured in turns (workflow/interleaved_runs.h): the
// median over rounds of a's step over b's step of the same round. A machine that slows down for a
// while slows both steps of a round alike, so this ratio moves far less than the ratio of their
// median steps, which may come from different rounds. Rounds are paired by index, up to the
// shorter list; NaN when there is no round with both steps positive.
double median_ratio_by_round(const std::vector<double>& a_steps_ms,
                             const std::vector<double>& b_steps_ms);

struct Candidate {
  std::vector<std::string> algorithms;  // every partitioner that chose this balance
  std::vector<int> balance;
  double bottleneck_ms = 0;
  Estimate predicted;
  Estimate measured;

  // (predicted - measured) / measured.
  double step_error() const;
  double speedup_error() const;
};

struct ValidationRecord {
  std::string model;
  std::vector<int64_t> input_shape;
  int stages = 0;
  int chunks = 0;
  std::string schedule;
  std::string checkpoint;
  int steps = 0;
  std::vector<Candidate> candidates;
  nlohmann::json environment = nlohmann::json::object();
};

nlohmann::json validation_to_json(const ValidationRecord& record);
// The inverse of validation_to_json (a pipebal.validation/1 document; a hand-written one may leave
// out the header fields, timelines and per-stage lists). Throws std::invalid_argument
// "FILE: path.to.field ..." for a field that is missing, of the wrong type or out of range.
ValidationRecord validation_from_json(const nlohmann::json& doc,
                                      const std::string& file = "validation");

}  // namespace pipebal::reports
