// `pipebal models`: the zoo with its knobs and defaults.
#pragma once

#include <CLI/CLI.hpp>

namespace pipebal::tools {
void add_models_command(CLI::App& app);
}  // namespace pipebal::tools
