// See html_report.h. The page is a column of cards: header and context, notes, the candidate
// summary, the three charts, the per-stage and per-step tables, and the per-layer table.
#include "pipebal/reports/html_report.h"

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pipebal/reports/report_charts.h"
#include "pipebal/reports/svg.h"

namespace pipebal::reports {
namespace {

// Prediction targets from the validation issue: step time within 15%, speed-up within 10%.
constexpr double kStepErrorTarget = 0.15;
constexpr double kSpeedupErrorTarget = 0.10;

constexpr const char* kStyle = R"css(
:root{--text:#1f2933;--muted:#5f6b7a;--line:#e3e8ef;--bg:#f5f7fa;--accent:#2f6ea5}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%;text-size-adjust:100%}
body{margin:0;background:var(--bg);color:var(--text);
  font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,"Noto Sans",
  "DejaVu Sans",sans-serif}
main{max-width:1120px;margin:0 auto;padding:28px 20px 40px}
header{margin-bottom:8px}
.kicker{color:var(--accent);font-size:.8rem;font-weight:600;letter-spacing:.06em;
  text-transform:uppercase;margin:0}
h1{font-size:1.7rem;line-height:1.25;margin:2px 0 10px;overflow-wrap:anywhere}
h2{font-size:1.12rem;margin:0 0 4px}
h3{font-size:.98rem;margin:14px 0 4px}
p.lead{color:var(--muted);margin:0 0 12px;font-size:.92rem}
.chips{display:flex;flex-wrap:wrap;gap:6px;margin:0;padding:0;list-style:none}
.chips li{background:#fff;border:1px solid var(--line);border-radius:999px;padding:2px 11px;
  font-size:.85rem}
.chips b{font-weight:600;color:var(--muted);margin-right:4px}
.card{background:#fff;border:1px solid var(--line);border-radius:10px;padding:18px 20px;
  margin:16px 0;box-shadow:0 1px 2px rgba(16,24,40,.04)}
.note{border-left:4px solid #d4a72c;background:#fff8e6;border-radius:6px;padding:8px 12px;
  margin:6px 0;font-size:.9rem}
dl.env{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:3px 18px;margin:0;
  font-size:.88rem}
dl.env dt{color:var(--muted)}
dl.env dd{margin:0;overflow-wrap:anywhere;font-variant-numeric:tabular-nums}
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch}
table{border-collapse:collapse;width:100%;font-size:.88rem;font-variant-numeric:tabular-nums}
th,td{padding:6px 10px;border-bottom:1px solid var(--line);text-align:right;white-space:nowrap}
th{font-weight:600;color:var(--muted);background:#f8fafc;font-size:.8rem;white-space:normal;
  vertical-align:bottom;line-height:1.25}
th.l,td.l{text-align:left}
th.group{text-align:center;color:var(--text);border-bottom:1px solid #cfd8e3}
tbody tr:hover td{background:#f8fafc}
tr.primary td{background:#eef5fc}
.tag{display:inline-block;font-size:.72rem;font-weight:600;color:var(--accent);
  border:1px solid #b9d3ea;border-radius:4px;padding:0 5px;margin-left:6px;vertical-align:1px}
.ok{color:#1a7f37;font-weight:600}
.miss{color:#c62828;font-weight:600}
.chart{margin:6px 0}
.chart svg{display:block;width:100%;height:auto}
.chart.wide svg{min-width:720px}
.chart.half svg{min-width:330px}
.chart.narrow{max-width:600px}
.pair{display:grid;grid-template-columns:repeat(auto-fit,minmax(330px,1fr));gap:8px 28px}
details{margin-top:10px}
summary{cursor:pointer;font-weight:600;color:var(--accent)}
.muted{color:var(--muted)}
footer{color:var(--muted);font-size:.8rem;text-align:center;margin-top:20px}
@media (max-width:640px){
  body{font-size:14px} main{padding:14px 10px 28px} .card{padding:14px 12px;margin:12px 0}
  h1{font-size:1.35rem} th,td{padding:5px 8px}
}
)css";

bool known(double value) {
  return std::isfinite(value);
}

std::string ms_cell(double ms) {
  return known(ms) ? format_ms(ms) : "\u2013";
}
std::string speedup_cell(double speedup) {
  return known(speedup) ? fmt::format("{:.2f}\u00d7", speedup) : "\u2013";
}
std::string bytes_cell(double bytes) {
  return known(bytes) ? format_bytes(bytes) : "\u2013";
}

// An error cell coloured against its target, with the target in the tooltip.
std::string error_cell(double error, double target) {
  if (!known(error)) return "<td>\u2013</td>";
  const bool ok = std::fabs(error) <= target;
  return fmt::format(R"(<td class="{}" title="target: within {:.0f}%">{}</td>)", ok ? "ok" : "miss",
                     100 * target, format_percent(error));
}

std::string algorithms_text(const ReportCandidate& candidate) {
  return candidate.algorithms.empty() ? std::string("candidate")
                                      : fmt::format("{}", fmt::join(candidate.algorithms, ", "));
}

std::string balance_text(const std::vector<int>& balance) {
  return fmt::format("[{}]", fmt::join(balance, ", "));
}

double at_or_nan(const std::vector<double>& values, size_t i) {
  return i < values.size() ? values[i] : std::nan("");
}

// Stage i's bytes; NaN when not measured (-1) or not listed.
double bytes_at(const std::vector<int64_t>& bytes, size_t i) {
  return i < bytes.size() && bytes[i] >= 0 ? static_cast<double>(bytes[i]) : std::nan("");
}

std::string header(const ReportData& data) {
  std::string chips;
  auto chip = [&](const char* name, const std::string& value) {
    if (!value.empty()) {
      chips += fmt::format("<li><b>{}</b>{}</li>", name, escape_html(value));
    }
  };
  chip("input", data.input_shape);
  chip("stages", data.stages > 0 ? std::to_string(data.stages) : "");
  chip("micro-batches", data.chunks > 0 ? std::to_string(data.chunks) : "");
  chip("schedule", data.schedule);
  chip("checkpoint", data.checkpoint);
  chip("steps", data.steps > 0 ? std::to_string(data.steps) : "");
  chip("device", data.device);
  chip("profiler", data.profile_backend);
  return fmt::format(
      "<header><p class=\"kicker\">pipebal &middot; pipeline balance report</p>"
      "<h1>{}</h1><ul class=\"chips\">{}</ul></header>\n",
      escape_html(data.model), chips);
}

std::string context_card(const ReportData& data) {
  std::string rows;
  for (const auto& [key, value] : data.environment) {
    rows += fmt::format("<dt>{}</dt><dd>{}</dd>", escape_html(key), escape_html(value));
  }
  rows += fmt::format("<dt>directory</dt><dd>{}</dd>", escape_html(data.dir));
  std::string notes;
  for (const std::string& note : data.notes) {
    notes += fmt::format("<p class=\"note\">{}</p>", escape_html(note));
  }
  return fmt::format(
      "<section class=\"card\" id=\"context\"><h2>Context</h2>{}<dl "
      "class=\"env\">{}</dl></section>\n",
      notes, rows);
}

std::string summary_card(const ReportData& data) {
  if (data.candidates.empty()) return "";
  std::string rows;
  for (size_t i = 0; i < data.candidates.size(); ++i) {
    const ReportCandidate& c = data.candidates[i];
    const double nan = std::nan("");
    rows += fmt::format(
        "<tr{}><td class=\"l\">{}{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td>{}"
        "<td>{}</td><td>{}</td>{}</tr>\n",
        i == data.primary ? " class=\"primary\"" : "", escape_html(algorithms_text(c)),
        i == data.primary ? "<span class=\"tag\">drawn below</span>" : "", balance_text(c.balance),
        ms_cell(c.predicted ? c.predicted->step_ms : nan),
        ms_cell(c.measured ? c.measured->step_ms : nan), error_cell(c.step_error, kStepErrorTarget),
        speedup_cell(c.predicted ? c.predicted->speedup() : nan),
        speedup_cell(c.measured ? c.measured->speedup() : nan),
        error_cell(c.speedup_error, kSpeedupErrorTarget));
  }
  return fmt::format(
      "<section class=\"card\" id=\"summary\"><h2>Candidates: predicted vs measured</h2>"
      "<p class=\"lead\">Step time of one training step with {} micro-batches; speed-up over the "
      "same balance run as one micro-batch (naive model parallelism). Error = (predicted &minus; "
      "measured) / measured; green within target (step {:.0f}%, speed-up {:.0f}%).</p>"
      "<div class=\"scroll\"><table><thead><tr><th class=\"l\" rowspan=\"2\">algorithms</th>"
      "<th class=\"l\" rowspan=\"2\">balance</th><th class=\"group\" colspan=\"3\">step time "
      "(ms)</th><th class=\"group\" colspan=\"3\">speed-up over 1 micro-batch</th></tr>"
      "<tr><th>predicted</th><th>measured</th><th>error</th><th>predicted</th><th>measured</th>"
      "<th>error</th></tr></thead><tbody>\n{}</tbody></table></div></section>\n",
      data.chunks > 0 ? std::to_string(data.chunks) : "M", 100 * kStepErrorTarget,
      100 * kSpeedupErrorTarget, rows);
}

// validate --plans / --auto: every configuration trained side by side.
std::string comparison_card(const ReportData& data) {
  const Comparison& comparison = data.comparison;
  if (comparison.configurations.empty()) return "";
  std::string rows;
  for (size_t i = 0; i < comparison.configurations.size(); ++i) {
    const ComparedConfiguration& c = comparison.configurations[i];
    const double in_turns_error = known(c.predicted_in_turns_ms)
                                      ? relative_error(c.predicted_in_turns_ms, c.measured_ms)
                                      : std::nan("");
    rows += fmt::format(
        "<tr{}><td class=\"l\">#{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td>"
        "<td class=\"l\">{}</td><td>{}</td><td>{}</td>{}<td>{}</td>{}<td>{} / {}</td><td>{}</td>"
        "<td>{}</td></tr>\n",
        c.measured_rank == 1 ? " class=\"primary\"" : "", i + 1, escape_html(c.name),
        escape_html(c.configuration), balance_text(c.balance), ms_cell(c.predicted_ms),
        ms_cell(c.measured_ms),
        error_cell(relative_error(c.predicted_ms, c.measured_ms), kStepErrorTarget),
        ms_cell(c.predicted_in_turns_ms), error_cell(in_turns_error, kStepErrorTarget),
        c.predicted_rank, c.measured_rank, bytes_cell(c.predicted_peak_bytes),
        bytes_cell(c.measured_peak_bytes));
  }
  return fmt::format(
      "<section class=\"card\" id=\"comparison\"><h2>Configurations trained side by side: "
      "predicted vs measured</h2><p class=\"lead\">From <code>pipebal {}</code>: every "
      "configuration trained in one process, one measured step of each in turn, so that a slow "
      "spell of the machine falls on all alike. Measured: the median step. In turns: predicted "
      "again from the model profiled between the rounds of steps. Ranks by step time, 1 the "
      "fastest; the measured fastest is highlighted. Peak: the busiest device's memory.</p>"
      "<div class=\"scroll chart half narrow\">{}</div>"
      "<div class=\"scroll\"><table><thead><tr><th class=\"l\">#</th><th class=\"l\">plan</th>"
      "<th class=\"l\">configuration</th><th class=\"l\">balance</th><th>predicted ms</th>"
      "<th>measured ms</th><th>error</th><th>in turns ms</th><th>its error</th>"
      "<th>rank predicted / measured</th><th>peak predicted</th><th>peak measured</th></tr>"
      "</thead><tbody>\n{}</tbody></table></div></section>\n",
      escape_html(comparison.source), comparison_chart(comparison), rows);
}

std::string layer_chart_card(const ReportData& data) {
  if (data.layers.empty()) return "";
  return fmt::format(
      "<section class=\"card\" id=\"layer-chart\"><h2>Per-layer cost and stage boundaries</h2>"
      "<p class=\"lead\">Profiled forward and backward time of each layer for one micro-batch; "
      "dashed lines mark where each candidate cuts the model into stages.</p>"
      "<div class=\"scroll chart wide\">{}</div></section>\n",
      layer_cost_chart(data));
}

std::string stage_table(const ReportCandidate& c, const std::vector<double>& caps) {
  std::string rows;
  int first = 0;
  const double nan = std::nan("");
  for (size_t s = 0; s < c.balance.size(); ++s) {
    const double predicted = at_or_nan(c.predicted_busy_ms, s);
    const double measured = at_or_nan(c.measured_busy_ms, s);
    const double error = known(predicted) && known(measured) && measured > 0
                             ? (predicted - measured) / measured
                             : nan;
    rows += fmt::format(
        "<tr><td class=\"l\">{}</td><td class=\"l\">{}&ndash;{} ({})</td><td>{}</td><td>{}</td>"
        "{}<td>{}</td><td>{}</td><td>{}</td></tr>\n",
        s, first, first + c.balance[s] - 1, c.balance[s], ms_cell(predicted), ms_cell(measured),
        error_cell(error, kStepErrorTarget),
        bytes_cell(c.predicted ? bytes_at(c.predicted->stage_bytes, s) : nan),
        bytes_cell(c.measured ? bytes_at(c.measured->stage_bytes, s) : nan),
        bytes_cell(at_or_nan(caps, s)));
    first += c.balance[s];
  }
  return fmt::format(
      "<div class=\"scroll\"><table><thead><tr><th class=\"l\">stage</th>"
      "<th class=\"l\">layers</th><th>predicted busy ms</th><th>measured busy ms</th>"
      "<th>error</th><th>predicted memory</th><th>measured peak</th><th>cap</th></tr></thead>"
      "<tbody>\n{}</tbody></table></div>\n",
      rows);
}

// Stage charts, stage table and timeline of one candidate.
std::string candidate_detail(const ReportData& data, const ReportCandidate& c) {
  std::string out = fmt::format(
      "<h3>Per-stage busy time and memory</h3><div class=\"pair\">"
      "<div class=\"scroll chart half\">{}</div><div class=\"scroll chart half\">{}</div></div>\n",
      stage_time_chart(c), stage_memory_chart(c, data.memory_cap_bytes));
  out += stage_table(c, data.memory_cap_bytes);
  const std::string timeline = timeline_chart(c, static_cast<int>(c.balance.size()));
  out += "<h3 id=\"timeline\">Pipeline timeline</h3>";
  const bool predicted = c.predicted && !c.predicted->timeline.empty();
  const bool measured = c.measured && !c.measured->timeline.empty();
  if (!predicted || !measured) {
    out += fmt::format("<p class=\"note\">No {} timeline for this candidate.</p>",
                       !predicted && !measured ? "predicted or measured"
                       : !predicted            ? "predicted"
                                               : "measured");
  }
  if (!timeline.empty()) out += "<div class=\"scroll chart wide\">" + timeline + "</div>\n";
  return out;
}

std::string candidates_card(const ReportData& data) {
  if (data.candidates.empty()) return "";
  const ReportCandidate& primary = data.candidates[data.primary];
  std::string out = fmt::format(
      "<section class=\"card\" id=\"stages\"><h2>Stages and timeline: {} {}</h2>"
      "<p class=\"lead\">Busy time is the sum of a stage's actions in one step. In the timeline "
      "each row is a stage; boxes are forward (F), recompute (R) and backward (B) actions, "
      "numbered by micro-batch; predicted and measured share one time axis.</p>\n",
      escape_html(algorithms_text(primary)), balance_text(primary.balance));
  out += candidate_detail(data, primary);
  for (size_t i = 0; i < data.candidates.size(); ++i) {
    if (i == data.primary) continue;
    const ReportCandidate& c = data.candidates[i];
    out += fmt::format("<details><summary>{} {}</summary>\n{}</details>\n",
                       escape_html(algorithms_text(c)), balance_text(c.balance),
                       candidate_detail(data, c));
  }
  return out + "</section>\n";
}

std::string steps_card(const ReportData& data) {
  if (data.run_steps.empty()) return "";
  // A long run lists its first and last steps: a row per step made a 300,000-step report 78 MB.
  constexpr size_t kListedAtEachEnd = 500;
  const size_t count = data.run_steps.size();
  const size_t left_out = count > 2 * kListedAtEachEnd ? count - 2 * kListedAtEachEnd : 0;
  std::string rows;
  for (size_t i = 0; i < count; ++i) {
    if (left_out > 0 && i == kListedAtEachEnd) {
      rows += fmt::format(
          "<tr><td class=\"l\" colspan=\"3\">\u2026 {} steps left out here (run.json has every "
          "one)</td></tr>",
          left_out);
      i += left_out - 1;
      continue;
    }
    const auto& [ms, loss] = data.run_steps[i];
    rows += fmt::format("<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td></tr>", i, ms_cell(ms),
                        known(loss) ? fmt::format("{:.4f}", loss) : "\u2013");
  }
  const std::string throughput =
      known(data.samples_per_s)
          ? fmt::format(" Throughput {:.1f} samples/s at the median step.", data.samples_per_s)
          : "";
  return fmt::format(
      "<section class=\"card\" id=\"run\"><h2>Training run</h2><p class=\"lead\">Every measured "
      "step "
      "(run.json), raw.{}</p>{}<div class=\"scroll\"><table><thead><tr><th class=\"l\">step</th>"
      "<th>ms</th><th>loss</th></tr></thead><tbody>{}</tbody></table></div></section>\n",
      throughput, loss_curve_chart(data.run_steps), rows);
}

std::string layer_table_card(const ReportData& data) {
  if (data.layers.empty()) return "";
  // Which stage of the drawn candidate each layer falls in.
  std::vector<int> stage_of(data.layers.size(), -1);
  if (!data.candidates.empty()) {
    size_t layer = 0;
    const std::vector<int>& balance = data.candidates[data.primary].balance;
    for (size_t s = 0; s < balance.size(); ++s) {
      for (int k = 0; k < balance[s] && layer < stage_of.size(); ++k) stage_of[layer++] = s;
    }
  }
  std::string rows;
  for (size_t i = 0; i < data.layers.size(); ++i) {
    const balance::LayerCost& l = data.layers[i];
    rows += fmt::format(
        "<tr><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
        i, escape_html(l.name), escape_html(l.type),
        stage_of[i] >= 0 ? std::to_string(stage_of[i]) : "\u2013", format_ms(l.forward_ms),
        format_ms(l.backward_ms), format_bytes(static_cast<double>(l.param_bytes)),
        format_bytes(static_cast<double>(l.activation_bytes)),
        format_bytes(static_cast<double>(l.output_bytes)));
  }
  return fmt::format(
      "<section class=\"card\" id=\"layers\"><h2>Layers</h2><p class=\"lead\">The profile, per "
      "micro-batch; "
      "stage as in the candidate drawn above.</p><div class=\"scroll\"><table><thead><tr>"
      "<th>#</th><th class=\"l\">name</th><th class=\"l\">type</th><th>stage</th>"
      "<th>forward ms</th><th>backward ms</th><th>parameters</th><th>activations</th>"
      "<th>output</th></tr></thead><tbody>\n{}</tbody></table></div></section>\n",
      rows);
}

}  // namespace

std::string render_html_report(const ReportInputs& inputs) {
  const ReportData data = make_report_data(inputs);
  std::string body = header(data) + context_card(data) + summary_card(data) +
                     comparison_card(data) + layer_chart_card(data) + candidates_card(data) +
                     steps_card(data) + layer_table_card(data);
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<title>{} &middot; pipebal report</title>\n<style>{}</style>\n</head>\n<body>\n<main>\n{}"
      "<footer>Generated by <code>pipebal report</code>. Self-contained: no scripts, no network."
      "</footer>\n</main>\n</body>\n</html>\n",
      escape_html(data.model), kStyle, body);
}

}  // namespace pipebal::reports
