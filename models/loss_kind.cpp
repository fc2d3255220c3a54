// See loss_kind.h.
#include "pipebal/models/loss_kind.h"

#include <stdexcept>

#include <fmt/format.h>

namespace pipebal::models {

std::string to_string(LossKind kind) {
  switch (kind) {
    case LossKind::kCrossEntropy:
      return "cross_entropy";
    case LossKind::kMse:
      return "mse";
    case LossKind::kNll:
      return "nll";
    case LossKind::kNone:
      return "none";
  }
  return "?";
}

LossKind parse_loss_kind(const std::string& name) {
  for (LossKind kind : {LossKind::kCrossEntropy, LossKind::kMse, LossKind::kNll, LossKind::kNone}) {
    if (to_string(kind) == name) return kind;
  }
  throw std::invalid_argument(
      fmt::format("unknown loss '{}' (valid: cross_entropy, mse, nll, none)", name));
}

}  // namespace pipebal::models
