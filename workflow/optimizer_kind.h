// The optimizers a run can train with (`train --optimizer`). Torch-free, like the settings that
// name one.
#pragma once

#include <string>

namespace pipebal::workflow {

enum class OptimizerKind { kSgd, kAdam };

// "sgd", "adam" and back; the parser throws std::invalid_argument listing them.
std::string to_string(OptimizerKind kind);
OptimizerKind parse_optimizer_kind(const std::string& name);

}  // namespace pipebal::workflow
