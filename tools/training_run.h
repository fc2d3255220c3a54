// One pipelined training run of a zoo or TorchScript model on synthetic data: what
// `pipebal train` executes and what `pipebal validate` repeats for every candidate balance.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "reports/run_record.h"

namespace pipebal::tools {

struct TrainSettings {
  std::string model;
  std::vector<int64_t> input_shape;  // empty: the model's default
  std::vector<int> balance;
  std::vector<std::string> devices{"cpu"};
  int chunks = 4;
  std::string schedule = "gpipe";
  std::string checkpoint = "except_last";
  int threads_per_stage = 1;
  int steps = 10;
  int warmup_steps = 2;
  std::string optimizer = "sgd";
  double lr = 0.01;
  uint64_t seed = 0;
  bool deferred_batch_norm = false;
  bool check_finite = false;
};

// Called after every step (warm-up included) with the step index, the number of steps in all,
// its time and loss.
using StepCallback = std::function<void(int step, int total, double ms, double loss)>;

// Builds the model and data from `settings.seed`, trains `warmup_steps + steps` steps and
// records the measured ones. Throws std::invalid_argument for bad settings.
reports::RunRecord run_training(const TrainSettings& settings, const StepCallback& on_step = {});

// "3,3,2" -> {3, 3, 2}; throws std::invalid_argument for anything else.
std::vector<int> parse_balance(const std::string& text);

}  // namespace pipebal::tools
