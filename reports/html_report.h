// `pipebal report`: one self-contained HTML page (inline CSS and SVG, no JavaScript, no network)
// comparing the predicted and measured pipeline for each candidate balance of a validation
// directory. Readable on a phone and on a wide screen.
#pragma once

#include <string>

#include "pipebal/reports/report_data.h"

namespace pipebal::reports {

// Renders the page. Throws std::invalid_argument naming the file and field when the profile is
// absent or a document lacks a field the report needs.
std::string render_html_report(const ReportInputs& inputs);

}  // namespace pipebal::reports
