// `pipebal demo`: the whole pipebal flow on the default model, with defaults that finish fast.
#pragma once

#include <CLI/CLI.hpp>

namespace pipebal::tools {
void add_demo_command(CLI::App& app);
}  // namespace pipebal::tools
