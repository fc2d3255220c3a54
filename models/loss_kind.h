// Which loss trains a model: the zoo's models name theirs, and `train --loss` picks one for
// the user's data. Torch-free, so that settings naming a loss need no LibTorch headers.
#pragma once

#include <cstdint>
#include <string>

namespace pipebal::models {

enum class LossKind {
  kCrossEntropy,  // output [N, classes] (or [N, T, vocab]) against class ids
  kMse,           // output of any shape against a target of the same shape
  kNll,           // log-probabilities [N, classes] (or [N, T, classes]) against class ids
  kNone,          // the model's output is the loss (a scalar per micro-batch)
};

// The class id cross-entropy and nll leave out of their mean (LibTorch's default ignore_index).
constexpr int64_t kIgnoredClass = -100;

// "cross_entropy", "mse", "nll", "none" and back; the parser throws std::invalid_argument listing
// them.
std::string to_string(LossKind kind);
LossKind parse_loss_kind(const std::string& name);

}  // namespace pipebal::models
