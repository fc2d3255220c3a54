// `pipebal report DIR`: renders DIR's profile, plan, run and validation documents as one
// self-contained HTML page (DIR/report.html by default).
#pragma once

#include <iosfwd>
#include <string>

#include <CLI/CLI.hpp>

namespace pipebal::tools {

// Everything `pipebal report` takes; the member defaults are the defaults --help shows.
struct ReportParams {
  std::string dir;          // required: a `pipebal validate` output directory
  std::string output_path;  // empty: DIR/report.html
};

// Registers the `report` subcommand; bad input throws std::invalid_argument, which main turns
// into one line and exit status 2.
void add_report_command(CLI::App& app);

// Renders and writes the report atomically, then prints its path to `out`; returns the path.
std::string run_report(const ReportParams& params, std::ostream& out);

}  // namespace pipebal::tools
