// `pipebal validate`: profile → balance → train with the same engine → compare the predicted
// speed-up with the measured one, for dp and the baseline partitioners.
#pragma once

#include <CLI/CLI.hpp>

#include "pipebal/workflow/validation.h"

namespace pipebal::tools {

// The settings are the library's (workflow/validation.h); the command only parses them.
using ValidateParams = workflow::ValidateSettings;

void add_validate_command(CLI::App& app);

// Runs the whole loop and writes DIR/{profile,plan,run,trace,validation}.json and report.html.
void run_validate(const ValidateParams& params);

}  // namespace pipebal::tools
