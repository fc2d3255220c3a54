// `pipebal link`: measures the link between two ranks of a multi-process run and stores it in a
// profile, so that `balance` prices transfers with it.
#pragma once

#include <CLI/CLI.hpp>

namespace pipebal::tools {
void add_link_command(CLI::App& app);
}  // namespace pipebal::tools
