// See report_charts.h. Geometry is in viewBox units; the page scales each chart to its column.
#include "pipebal/reports/report_charts.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pipebal/reports/svg.h"

namespace pipebal::reports {
namespace {

bool known(double value) {
  return std::isfinite(value);
}

std::string candidate_label(const ReportCandidate& candidate) {
  const std::string who = candidate.algorithms.empty()
                              ? std::string("candidate")
                              : fmt::format("{}", fmt::join(candidate.algorithms, ", "));
  return fmt::format("{} [{}]", who, fmt::join(candidate.balance, ","));
}

// A y axis from ticks.front() to ticks.back(): grid lines, tick labels and a rotated title.
void draw_y_axis(Svg& svg, double left, double right, double top, double bottom,
                 const std::vector<double>& ticks, const std::function<std::string(double)>& label,
                 const std::string& title) {
  const double low = ticks.front(), span = ticks.back() - ticks.front();
  TextStyle tick_style;
  tick_style.anchor = "end";
  tick_style.baseline = "middle";
  tick_style.size = 11;
  tick_style.fill = palette::kMuted;
  for (double tick : ticks) {
    const double y = bottom - (bottom - top) * (tick - low) / span;
    svg.line(left, y, right, y, tick == 0 ? palette::kAxis : palette::kGrid);
    svg.text(left - 6, y, label(tick), tick_style);
  }
  TextStyle title_style;
  title_style.anchor = "middle";
  title_style.size = 11;
  title_style.fill = palette::kMuted;
  title_style.rotate_deg = -90;
  svg.text(13, (top + bottom) / 2, title, title_style);
}

struct BarSeries {
  std::string label;
  const char* color;
  std::vector<double> values;  // per group; NaN: no bar
};

struct GroupedBars {
  std::string title;
  std::string y_title;
  double unit = 1;           // values are drawn in this unit: 1 for ms, 1024^k for bytes
  std::string unit_name;     // "ms", "MiB"
  std::vector<double> caps;  // per group; NaN: none
  std::vector<std::string> group_names;  // below each group; empty: "stage 0", "stage 1", ...
};

// Bytes are labelled in the binary unit of `max_bytes` so that ticks are round (2, 4, 6 MiB).
std::pair<double, std::string> byte_unit(double max_bytes) {
  static constexpr const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double unit = 1;
  int index = 0;
  while (max_bytes >= 1024 * unit && index < 4) {
    unit *= 1024;
    ++index;
  }
  return {unit, kNames[index]};
}

// Bars per stage, one per series side by side, value labels above them.
std::string grouped_bar_chart(const std::vector<BarSeries>& series, size_t groups,
                              const GroupedBars& options) {
  constexpr double kWidth = 440, kHeight = 270;
  constexpr double kLeft = 76, kRight = 12, kTop = 38, kBottom = 40;
  Svg svg(kWidth, kHeight, options.title);
  double max = 0;
  for (const BarSeries& s : series) {
    for (double v : s.values) {
      if (known(v)) max = std::max(max, v);
    }
  }
  bool has_cap = false;
  for (double cap : options.caps) {
    if (known(cap)) {
      max = std::max(max, cap);
      has_cap = true;
    }
  }
  // Headroom for the value labels above the tallest bar.
  std::vector<double> ticks = nice_ticks(max * 1.08 / options.unit, 4);
  for (double& tick : ticks) tick *= options.unit;
  const double plot_bottom = kHeight - kBottom;
  auto in_unit = [&](double value) { return format_ms(value / options.unit); };
  draw_y_axis(
      svg, kLeft, kWidth - kRight, kTop, plot_bottom, ticks,
      [&](double tick) { return format_tick(tick / options.unit) + " " + options.unit_name; },
      options.y_title);
  const double scale = (plot_bottom - kTop) / ticks.back();
  const auto group_name = [&options](size_t g) {
    return g < options.group_names.size() ? options.group_names[g] : fmt::format("stage {}", g);
  };
  const double slot = (kWidth - kRight - kLeft) / std::max<size_t>(groups, 1);
  const double bar = std::min(44.0, slot * 0.8 / std::max<size_t>(series.size(), 1));
  TextStyle value_style;
  value_style.anchor = "middle";
  value_style.size = 10;
  value_style.fill = palette::kMuted;
  value_style.halo = true;
  TextStyle group_style;
  group_style.anchor = "middle";
  group_style.size = 12;
  for (size_t g = 0; g < groups; ++g) {
    const double center = kLeft + slot * (g + 0.5);
    const double first_x = center - bar * series.size() / 2;
    for (size_t s = 0; s < series.size(); ++s) {
      if (g >= series[s].values.size() || !known(series[s].values[g])) continue;
      const double value = series[s].values[g];
      const double x = first_x + bar * s;
      svg.rect(x + 1, plot_bottom - value * scale, bar - 2, value * scale, series[s].color,
               fmt::format("{}: {} {} {}", group_name(g), series[s].label, in_unit(value),
                           options.unit_name));
      // The axis carries the unit; bare numbers keep neighbouring labels apart, and a label
      // wider than its bar is left to the tooltip and the table below.
      const std::string label = in_unit(value);
      if (text_width(label.size(), value_style.size) <= bar + 2) {
        svg.text(x + bar / 2, plot_bottom - value * scale - 4, label, value_style);
      }
    }
    if (g < options.caps.size() && known(options.caps[g])) {
      const double y = plot_bottom - options.caps[g] * scale;
      svg.line(center - slot * 0.46, y, center + slot * 0.46, y, palette::kCap, 2, "6 3");
    }
    svg.text(center, plot_bottom + 18, group_name(g), group_style);
  }
  double x = kLeft;
  for (const BarSeries& s : series) x = svg.legend_item(x, 16, s.color, s.label);
  if (has_cap) svg.legend_item(x, 16, palette::kCap, "memory cap", "6 3");
  return svg.str();
}

std::string format_ms_axis(double ms) {
  return format_tick(ms) + " ms";
}

const char* action_color(pipeline::ActionKind kind) {
  switch (kind) {
    case pipeline::ActionKind::kForward:
      return palette::kForward;
    case pipeline::ActionKind::kRecompute:
      return palette::kRecompute;
    case pipeline::ActionKind::kBackward:
      break;
    case pipeline::ActionKind::kWeight:
      return palette::kWeight;
  }
  return palette::kBackward;
}

const char* action_name(pipeline::ActionKind kind) {
  switch (kind) {
    case pipeline::ActionKind::kForward:
      return "forward";
    case pipeline::ActionKind::kRecompute:
      return "recompute";
    case pipeline::ActionKind::kBackward:
      break;
    case pipeline::ActionKind::kWeight:
      return "weight gradients";
  }
  return "backward";
}

// Per-stage bytes for a chart: -1 (not measured) becomes NaN, which the chart leaves out.
std::vector<double> bytes_or_nan(const std::vector<int64_t>& bytes) {
  std::vector<double> out;
  for (int64_t b : bytes) {
    out.push_back(b >= 0 ? static_cast<double>(b) : std::numeric_limits<double>::quiet_NaN());
  }
  return out;
}

struct GanttPanel {
  std::string title;
  const pipeline::Timeline* timeline;
  double step_ms;
};

}  // namespace

std::string layer_cost_chart(const ReportData& data) {
  constexpr double kWidth = 960, kHeight = 340;
  constexpr double kLeft = 72, kRight = 16, kTop = 64, kBottom = 46;
  Svg svg(kWidth, kHeight, "Per-layer forward and backward time with stage boundaries");
  const size_t n = data.layers.size();
  double max = 0;
  for (const balance::LayerCost& layer : data.layers)
    max = std::max(max, layer.forward_ms + layer.backward_ms);
  const std::vector<double> ticks = nice_ticks(max, 5);
  const double plot_bottom = kHeight - kBottom;
  draw_y_axis(svg, kLeft, kWidth - kRight, kTop, plot_bottom, ticks, format_ms_axis,
              "time per micro-batch");
  const double scale = (plot_bottom - kTop) / ticks.back();
  const double slot = (kWidth - kLeft - kRight) / std::max<size_t>(n, 1);
  const double bar = std::max(1.0, slot * 0.72);
  // Label every k-th layer so that index labels never overlap.
  const size_t label_every = std::max<size_t>(1, static_cast<size_t>(std::ceil(26.0 / slot)));
  TextStyle index_style;
  index_style.anchor = "middle";
  index_style.size = 11;
  index_style.fill = palette::kMuted;
  for (size_t i = 0; i < n; ++i) {
    const balance::LayerCost& layer = data.layers[i];
    const double x = kLeft + slot * i + (slot - bar) / 2;
    const std::string tooltip =
        fmt::format("layer {} {} ({}): forward {} ms, backward {} ms", i, layer.name, layer.type,
                    format_ms(layer.forward_ms), format_ms(layer.backward_ms));
    const double f = layer.forward_ms * scale, b = layer.backward_ms * scale;
    svg.rect(x, plot_bottom - f, bar, f, palette::kForward, tooltip);
    svg.rect(x, plot_bottom - f - b, bar, b, palette::kBackward, tooltip);
    if (i % label_every == 0) {
      svg.text(kLeft + slot * (i + 0.5), plot_bottom + 15, std::to_string(i), index_style);
    }
  }
  TextStyle axis_title;
  axis_title.anchor = "middle";
  axis_title.size = 11;
  axis_title.fill = palette::kMuted;
  svg.text((kLeft + kWidth - kRight) / 2, kHeight - 8, "layer index (names in the layer table)",
           axis_title);

  // Boundaries: candidates that cut at the same place are nudged apart so each stays visible.
  const size_t count = data.candidates.size();
  for (size_t c = 0; c < count; ++c) {
    const double nudge = (static_cast<double>(c) - (count - 1) / 2.0) * 4.0;
    int cut = 0;
    const std::vector<int>& balance = data.candidates[c].balance;
    for (size_t s = 0; s + 1 < balance.size(); ++s) {
      cut += balance[s];
      if (cut <= 0 || static_cast<size_t>(cut) >= n) break;  // a balance for another profile
      const double x = kLeft + slot * cut + nudge;
      svg.line(x, kTop - 8, x, plot_bottom, palette::candidate(c), 2, "6 4");
    }
  }
  // Stage names for the candidate drawn in full, centred over its stages.
  if (!data.candidates.empty()) {
    TextStyle stage_style;
    stage_style.anchor = "middle";
    stage_style.size = 11;
    stage_style.fill = palette::candidate(data.primary);
    int first = 0;
    const std::vector<int>& balance = data.candidates[data.primary].balance;
    for (size_t s = 0; s < balance.size(); ++s) {
      const double center = kLeft + slot * (first + balance[s] / 2.0);
      svg.text(center, kTop - 12, fmt::format("stage {}", s), stage_style);
      first += balance[s];
    }
  }
  double x = kLeft;
  x = svg.legend_item(x, 16, palette::kForward, "forward");
  x = svg.legend_item(x, 16, palette::kBackward, "backward");
  for (size_t c = 0; c < count; ++c) {
    // Wrap the legend onto a second line when the candidates do not fit on the first.
    const std::string label = "cuts: " + candidate_label(data.candidates[c]);
    if (x + text_width(label.size(), 12) + 40 > kWidth) x = kLeft;
    x = svg.legend_item(x, x == kLeft ? 36 : 16, palette::candidate(c), label, "6 4");
  }
  return svg.str();
}

std::string stage_time_chart(const ReportCandidate& candidate) {
  std::vector<BarSeries> series;
  if (candidate.predicted) {
    series.push_back({"predicted busy", palette::kPredicted, candidate.predicted_busy_ms});
  }
  if (candidate.measured) {
    series.push_back({"measured busy", palette::kMeasured, candidate.measured_busy_ms});
  }
  GroupedBars options;
  options.title = "Busy time per step and stage: predicted and measured";
  options.y_title = "busy time per step";
  options.unit_name = "ms";
  return grouped_bar_chart(series, candidate.balance.size(), options);
}

std::string stage_memory_chart(const ReportCandidate& candidate, const std::vector<double>& caps) {
  std::vector<BarSeries> series;
  if (candidate.predicted) {
    series.push_back(
        {"predicted", palette::kPredicted, bytes_or_nan(candidate.predicted->stage_bytes)});
  }
  if (candidate.measured) {
    series.push_back(
        {"measured peak", palette::kMeasured, bytes_or_nan(candidate.measured->stage_bytes)});
  }
  GroupedBars options;
  options.title = "Memory per stage: predicted, measured peak and cap";
  options.y_title = "memory";
  options.caps = caps;
  double max = 0;
  for (const BarSeries& s : series) {
    for (double v : s.values) max = known(v) ? std::max(max, v) : max;
  }
  for (double cap : caps) max = known(cap) ? std::max(max, cap) : max;
  std::tie(options.unit, options.unit_name) = byte_unit(max);
  return grouped_bar_chart(series, candidate.balance.size(), options);
}

std::string comparison_chart(const Comparison& comparison) {
  std::vector<double> predicted, measured, in_turns;
  std::vector<std::string> names;
  bool profiled_in_turns = false;
  for (const ComparedConfiguration& c : comparison.configurations) {
    predicted.push_back(c.predicted_ms);
    measured.push_back(c.measured_ms);
    in_turns.push_back(c.predicted_in_turns_ms);
    profiled_in_turns = profiled_in_turns || known(c.predicted_in_turns_ms);
    names.push_back(fmt::format("#{}", names.size() + 1));
  }
  std::vector<BarSeries> series = {{"predicted", palette::kPredicted, predicted}};
  if (profiled_in_turns)
    series.push_back({"predicted in turns", palette::kPredictedInTurns, in_turns});
  series.push_back({"measured", palette::kMeasured, measured});
  GroupedBars options;
  options.title = "Step time per configuration: predicted and measured";
  options.y_title = "step time";
  options.unit_name = "ms";
  options.group_names = names;
  return grouped_bar_chart(series, names.size(), options);
}

std::string loss_curve_chart(const std::vector<std::pair<double, double>>& steps) {
  struct Point {
    double step;  // a step, or the middle of the steps averaged into the point
    double loss;
    std::string title;
  };
  std::vector<std::pair<size_t, double>> known_losses;  // (step, loss)
  double min = 0, max = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const double loss = steps[i].second;
    if (!known(loss) || std::abs(loss) > kMaxDrawnValue) continue;  // a diverged step: no point
    known_losses.emplace_back(i, loss);
  }
  if (known_losses.size() < 2) return "";
  // A long run is drawn as the means of consecutive groups of steps: no more points than the
  // plot has room for (a point per step made a 300,000-step report 78 MB).
  const size_t group =
      (known_losses.size() + kMaxLossCurvePoints - 1) / kMaxLossCurvePoints;  // 1: every step
  std::vector<Point> points;
  for (size_t first = 0; first < known_losses.size(); first += group) {
    const size_t end = std::min(first + group, known_losses.size());
    double step_sum = 0, loss_sum = 0;
    for (size_t k = first; k < end; ++k) {
      step_sum += static_cast<double>(known_losses[k].first);
      loss_sum += known_losses[k].second;
    }
    const double n = static_cast<double>(end - first);
    const double loss = loss_sum / n;
    points.push_back(
        {step_sum / n, loss,
         end - first == 1
             ? fmt::format("step {}: loss {:.4f}", known_losses[first].first, loss)
             : fmt::format("steps {} to {}: mean loss {:.4f}", known_losses[first].first,
                           known_losses[end - 1].first, loss)});
    min = std::min(min, loss);
    max = std::max(max, loss);
  }
  constexpr double kWidth = 640, kHeight = 240;
  constexpr double kLeft = 64, kRight = 16, kTop = 16, kBottom = 40;
  Svg svg(kWidth, kHeight, "Loss per training step");
  const std::vector<double> ticks = nice_ticks(min, max, 4);  // from 0, or below for a loss < 0
  const double bottom = kHeight - kBottom;
  draw_y_axis(svg, kLeft, kWidth - kRight, kTop, bottom, ticks, format_tick, "loss");
  const double last = static_cast<double>(steps.size() - 1);
  const auto x_of = [&](double step) { return kLeft + (kWidth - kRight - kLeft) * step / last; };
  const auto y_of = [&](double loss) {
    return bottom - (bottom - kTop) * (loss - ticks.front()) / (ticks.back() - ticks.front());
  };
  TextStyle step_style;
  step_style.anchor = "middle";
  step_style.size = 11;
  step_style.fill = palette::kMuted;
  for (double tick : nice_ticks(last, 6)) {
    if (tick > last) break;
    if (tick != std::floor(tick)) continue;  // steps are whole: 0.5 would label step 0 again
    svg.text(x_of(tick), bottom + 16, format_tick(tick), step_style);
  }
  svg.text((kLeft + kWidth - kRight) / 2, kHeight - 6, "step", step_style);
  for (size_t k = 1; k < points.size(); ++k) {
    svg.line(x_of(points[k - 1].step), y_of(points[k - 1].loss), x_of(points[k].step),
             y_of(points[k].loss), palette::kMeasured, 2);
  }
  for (const Point& point : points) {
    svg.rect(x_of(point.step) - 2.5, y_of(point.loss) - 2.5, 5, 5, palette::kMeasured, point.title);
  }
  return svg.str();
}

std::string timeline_chart(const ReportCandidate& candidate, int stages) {
  std::vector<GanttPanel> panels;
  if (candidate.predicted && !candidate.predicted->timeline.empty()) {
    panels.push_back(
        {"Predicted (simulator)", &candidate.predicted->timeline, candidate.predicted->step_ms});
  }
  if (candidate.measured && !candidate.measured->timeline.empty()) {
    panels.push_back(
        {"Measured (engine)", &candidate.measured->timeline, candidate.measured->step_ms});
  }
  if (panels.empty()) return "";
  for (const GanttPanel& panel : panels) {
    for (const pipeline::TimedAction& e : *panel.timeline) stages = std::max(stages, e.stage + 1);
  }

  constexpr double kWidth = 960, kLeft = 78, kRight = 20, kTop = 34;
  constexpr double kRow = 26, kRowGap = 5, kPanelTitle = 26, kPanelGap = 16, kAxis = 44;
  const double panel_height = kPanelTitle + stages * (kRow + kRowGap);
  const double height =
      kTop + panels.size() * panel_height + (panels.size() - 1) * kPanelGap + kAxis;
  Svg svg(kWidth, height, "Pipeline timeline: predicted and measured, one row per stage");

  // Each panel starts at its first action, so an engine timeline with an absolute clock lines
  // up with the simulator's; both share one scale so their lengths compare directly.
  std::vector<double> origin;
  double max_ms = 0;
  for (const GanttPanel& panel : panels) {
    double first = panel.timeline->front().start_ms, last = 0;
    for (const pipeline::TimedAction& e : *panel.timeline) {
      first = std::min(first, e.start_ms);
      last = std::max(last, e.end_ms);
    }
    origin.push_back(first);
    max_ms = std::max(max_ms, last - first);
  }
  // A little room past the longer step so its end marker does not sit on the frame.
  const std::vector<double> ticks = nice_ticks(max_ms * 1.03, 8);
  const double plot_right = kWidth - kRight;
  const double ms_to_x = (plot_right - kLeft) / ticks.back();
  const double axis_y = height - kAxis + 6;

  for (double tick : ticks) {
    const double x = kLeft + tick * ms_to_x;
    svg.line(x, kTop, x, axis_y, palette::kGrid);
  }
  TextStyle row_style;
  row_style.anchor = "end";
  row_style.baseline = "middle";
  row_style.size = 12;
  TextStyle title_style;
  title_style.bold = true;
  title_style.size = 13;
  TextStyle box_style;
  box_style.anchor = "middle";
  box_style.baseline = "middle";
  box_style.size = 11;
  box_style.fill = "#ffffff";
  TextStyle step_style;
  step_style.size = 11;
  step_style.fill = palette::kText;

  for (size_t p = 0; p < panels.size(); ++p) {
    const GanttPanel& panel = panels[p];
    const double top = kTop + p * (panel_height + kPanelGap);
    svg.text(kLeft, top + 16, panel.title, title_style);
    const double rows_top = top + kPanelTitle;
    for (int s = 0; s < stages; ++s) {
      const double y = rows_top + s * (kRow + kRowGap);
      svg.rect(kLeft, y, plot_right - kLeft, kRow, "#f3f5f8");
      svg.text(kLeft - 8, y + kRow / 2, fmt::format("stage {}", s), row_style);
    }
    for (const pipeline::TimedAction& e : *panel.timeline) {
      if (e.stage < 0) continue;
      const pipeline::ActionKind kind = e.action.kind;
      const int micro_batch = e.action.micro_batch;
      const double x = kLeft + (e.start_ms - origin[p]) * ms_to_x;
      const double w = std::max(0.8, (e.end_ms - e.start_ms) * ms_to_x);
      const double y = rows_top + e.stage * (kRow + kRowGap);
      // A hairline gap between back-to-back boxes keeps them apart.
      svg.rect(
          x, y, std::max(0.8, w - 0.8), kRow, action_color(kind),
          fmt::format("stage {} {}{} ({}): {}-{} ms, {} ms", e.stage, pipeline::to_string(kind),
                      micro_batch, action_name(kind), format_ms(e.start_ms - origin[p]),
                      format_ms(e.end_ms - origin[p]), format_ms(e.end_ms - e.start_ms)));
      const std::string label = std::to_string(micro_batch);
      if (w > text_width(label.size(), box_style.size) + 6) {
        TextStyle style = box_style;
        if (kind == pipeline::ActionKind::kRecompute) style.fill = palette::kText;
        svg.text(x + w / 2, y + kRow / 2 + 0.5, label, style);
      }
    }
    // The step's end: the simulator's prediction or the engine's median step.
    if (known(panel.step_ms) && panel.step_ms > 0) {
      const double x = kLeft + std::min(panel.step_ms, ticks.back()) * ms_to_x;
      const double bottom = rows_top + stages * (kRow + kRowGap) - kRowGap;
      svg.line(x, top + 4, x, bottom, palette::kText, 1.5, "3 3");
      TextStyle end_style = step_style;
      end_style.anchor = x > plot_right - 120 ? "end" : "start";
      svg.text(end_style.anchor[0] == 'e' ? x - 5 : x + 5, top + 16,
               fmt::format("step {} ms", format_ms(panel.step_ms)), end_style);
    }
  }

  TextStyle tick_style;
  tick_style.anchor = "middle";
  tick_style.size = 11;
  tick_style.fill = palette::kMuted;
  svg.line(kLeft, axis_y, plot_right, axis_y, palette::kAxis);
  for (double tick : ticks) {
    const double x = kLeft + tick * ms_to_x;
    svg.line(x, axis_y, x, axis_y + 4, palette::kAxis);
    svg.text(x, axis_y + 17, format_tick(tick), tick_style);
  }
  TextStyle axis_title = tick_style;
  svg.text((kLeft + plot_right) / 2, height - 6, "time within the step (ms)", axis_title);

  double x = kLeft;
  x = svg.legend_item(x, 14, palette::kForward, "F forward");
  x = svg.legend_item(x, 14, palette::kRecompute, "R recompute");
  x = svg.legend_item(x, 14, palette::kBackward, "B backward");
  const auto has_weight = [](const pipeline::Timeline* timeline) {
    return std::any_of(timeline->begin(), timeline->end(), [](const pipeline::TimedAction& e) {
      return e.action.kind == pipeline::ActionKind::kWeight;
    });
  };
  if (std::any_of(panels.begin(), panels.end(),
                  [&](const GanttPanel& panel) { return has_weight(panel.timeline); })) {
    x = svg.legend_item(x, 14, palette::kWeight, "W weight gradients");
  }
  TextStyle hint;
  hint.size = 11;
  hint.fill = palette::kMuted;
  hint.baseline = "middle";
  svg.text(x, 14, "numbers: micro-batch", hint);
  return svg.str();
}

}  // namespace pipebal::reports
