// `pipebal launch`: runs a command as the processes of a multi-process run (torchrun's
// conventions, no Python needed).
#pragma once

#include <CLI/CLI.hpp>

namespace pipebal::tools {

// The exit status a command wants main() to return, with nothing more printed.
struct ExitStatus {
  int status = 0;
};

void add_launch_command(CLI::App& app);

}  // namespace pipebal::tools
