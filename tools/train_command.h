// `pipebal train`: pipelined training with a balance vector or a plan, measured.
#pragma once

#include <CLI/CLI.hpp>

namespace pipebal::tools {
void add_train_command(CLI::App& app);
}  // namespace pipebal::tools
