// The HTML report's charts, each an inline <svg> string drawn from ReportData: per-layer cost
// with every candidate's stage boundaries, per-stage busy time and memory (predicted beside
// measured, against the caps), the pipeline timeline as a Gantt chart, and the training loss.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "pipebal/reports/report_data.h"

namespace pipebal::reports {

// Stacked forward/backward bars per layer; each candidate's stage boundaries as dashed
// vertical lines in its own colour, with a legend.
std::string layer_cost_chart(const ReportData& data);

// Busy time per step per stage: predicted beside measured.
std::string stage_time_chart(const ReportCandidate& candidate);

// Memory per stage, predicted beside measured peak, with each stage's cap as a dashed line
// (`caps` per stage; NaN or missing: none).
std::string stage_memory_chart(const ReportCandidate& candidate, const std::vector<double>& caps);

// Each compared configuration's step time (numbered #1, #2, ... as the report's table):
// predicted, predicted in turns where profiled so, and measured side by side.
std::string comparison_chart(const Comparison& comparison);

// At most this many points in the loss curve: about one per pixel of its plot.
constexpr size_t kMaxLossCurvePoints = 560;

// The loss of every training step (`steps`: (ms, loss) per step), a line through one point per
// step with the step and loss as its tooltip. A longer run draws the mean of each group of
// consecutive steps (at most kMaxLossCurvePoints points). Empty with fewer than two known losses.
std::string loss_curve_chart(const std::vector<std::pair<double, double>>& steps);

// One Gantt panel per side that has a timeline (predicted above measured) on a shared time
// axis: a row per stage, F/R/B coloured, the micro-batch number inside boxes wide enough.
// Empty when neither side has a timeline.
std::string timeline_chart(const ReportCandidate& candidate, int stages);

}  // namespace pipebal::reports
