// See autograd_run_cost.h.
#include "pipebal/profiler/autograd_run_cost.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include <torch/torch.h>

#include "pipebal/pipeline/handed_backward.h"
#include "pipebal/profiler/keep_default_generator.h"
#include "pipebal/profiler/statistics.h"

namespace pipebal::profiler {
namespace {

constexpr int kLayers = 16;
constexpr int64_t kWidth = 8;
constexpr int kWarmupRounds = 5;

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

class Chain {
 public:
  Chain() {
    for (int l = 0; l < kLayers; ++l) layers_.emplace_back(kWidth, kWidth);
  }

  // The whole chain's backward in one autograd run, as a stage runs it.
  double one_run_ms(const at::Tensor& input) {
    at::Tensor x = input.detach().requires_grad_(true);
    for (auto& layer : layers_) x = layer->forward(x);
    at::Tensor grad = at::ones_like(x);
    const auto start = Clock::now();
    pipeline::handed_backward({std::move(x)}, {std::move(grad)});
    return ms_since(start);
  }

  // Each layer's backward in a run of its own, from the gradient the next one left at its
  // input, as the profiler runs them; the runs' times summed.
  double run_per_layer_ms(const at::Tensor& input) {
    std::vector<at::Tensor> inputs, outputs;
    at::Tensor x = input;
    for (auto& layer : layers_) {
      inputs.push_back(x.detach().requires_grad_(true));
      outputs.push_back(layer->forward(inputs.back()));
      x = outputs.back();
    }
    double total_ms = 0;
    for (size_t k = layers_.size(); k-- > 0;) {
      at::Tensor grad = k + 1 == layers_.size() ? at::ones_like(outputs[k]) : inputs[k + 1].grad();
      const auto start = Clock::now();
      pipeline::handed_backward({std::move(outputs[k])}, {std::move(grad)});
      total_ms += ms_since(start);
    }
    return total_ms;
  }

  void zero_grads() {
    for (auto& layer : layers_) {
      for (at::Tensor& p : layer->parameters()) {
        if (p.grad().defined()) p.mutable_grad().zero_();
      }
    }
  }

 private:
  std::vector<torch::nn::Linear> layers_;
};

}  // namespace

double measure_autograd_run_ms(int rounds) {
  const KeepDefaultGenerator keep;  // the chain's weights and input are random
  rounds = std::max(rounds, 3);
  Chain chain;
  const at::Tensor input = torch::randn({1, kWidth});
  std::vector<double> per_run_ms;
  for (int r = -kWarmupRounds; r < rounds; ++r) {
    const double one = chain.one_run_ms(input);
    const double each = chain.run_per_layer_ms(input);
    chain.zero_grads();
    if (r >= 0) per_run_ms.push_back((each - one) / (kLayers - 1));
  }
  return std::max(0.0, median(per_run_ms));
}

}  // namespace pipebal::profiler
