// See optimizer_kind.h.
#include "pipebal/workflow/optimizer_kind.h"

#include <stdexcept>

namespace pipebal::workflow {

std::string to_string(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kAdam:
      return "adam";
  }
  return "?";
}

OptimizerKind parse_optimizer_kind(const std::string& name) {
  for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdam}) {
    if (to_string(kind) == name) return kind;
  }
  throw std::invalid_argument("unknown optimizer '" + name + "' (valid: sgd, adam)");
}

}  // namespace pipebal::workflow
