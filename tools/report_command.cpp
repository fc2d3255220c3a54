// See report_command.h.
#include "tools/report_command.h"

#include <filesystem>
#include <iostream>
#include <memory>
#include <ostream>

#include "pipebal/common/atomic_file.h"
#include "pipebal/common/distinct_paths.h"
#include "pipebal/reports/html_report.h"

namespace pipebal::tools {

std::string run_report(const ReportParams& params, std::ostream& out) {
  const reports::ReportInputs inputs = reports::load_report_inputs(params.dir);
  const std::string html = reports::render_html_report(inputs);
  const std::string path = params.output_path.empty()
                               ? (std::filesystem::path(params.dir) / "report.html").string()
                               : params.output_path;
  // The documents it read stay as they are.
  std::vector<NamedPath> documents;
  for (const std::string& file : inputs.files) documents.push_back({"the report", file});
  check_outputs_apart(documents, {{"-o", path}});
  write_file_atomically(path, html);
  out << path << "\n";
  return path;
}

void add_report_command(CLI::App& app) {
  auto params = std::make_shared<ReportParams>();
  CLI::App* sub = app.add_subcommand(
      "report",
      "Render a validation directory (profile.json, and plan.json, run.json, validation.json\n"
      "when present) as one self-contained HTML page: predicted vs measured step time and\n"
      "speed-up per candidate, per-layer and per-stage charts, and the pipeline timeline.\n"
      "The directories of `validate --auto` and `validate --plans` (plan-validation.json,\n"
      "plans-comparison.json) show every configuration trained, predicted vs measured.");
  sub->footer(
      "Example:\n"
      "  pipebal validate --model mlp:layers=16,width=512 --input-shape 64,512 --stages 2 "
      "--chunks 4 -o out/\n"
      "  pipebal report out/                      # writes out/report.html\n"
      "  pipebal report out/ -o /tmp/mlp.html\n"
      "  pipebal validate --plans plans/*.json -o compared/ && pipebal report compared/");
  sub->add_option("dir", params->dir,
                  "Directory holding profile.json or a comparison (and the others)")
      ->required();
  sub->add_option("-o,--output", params->output_path,
                  "Write the page here (default: DIR/report.html)");
  sub->callback([params]() { run_report(*params, std::cout); });
}

}  // namespace pipebal::tools
