// `pipebal launch`: runs a command as the processes of a multi-process run (torchrun's
// conventions, no Python needed).
#pragma once

#include <CLI/CLI.hpp>

namespace pipebal::tools {

void add_launch_command(CLI::App& app);

}  // namespace pipebal::tools
