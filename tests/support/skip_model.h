// A small float64 model that exercises what a pipeline must carry between stages: two input
// tensors, a tensor dropped mid-way (its gradient is undefined), and a skip tensor stashed in
// one layer and popped five layers later. Shared by the engine's tests in one process and
// across processes.
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

#include "pipebal/pipeline/batch.h"
#include "pipebal/pipeline/layer_seq.h"
#include "pipebal/pipeline/module_layer.h"

namespace pipebal::pipeline::testing {

namespace nn = torch::nn;

// Stashes its input under `name` and passes it on through a Linear.
struct StashLinearImpl : nn::Cloneable<StashLinearImpl> {
  StashLinearImpl(std::string name, int64_t width) : name_(std::move(name)), width_(width) {
    reset();
  }
  void reset() override { fc_ = register_module("fc", nn::Linear(width_, width_)); }
  Batch forward(Batch b) {
    b.skips[name_] = b.value();
    b.value() = torch::tanh(fc_->forward(b.value()));
    return b;
  }
  std::string name_;
  int64_t width_;
  nn::Linear fc_{nullptr};
};
TORCH_MODULE(StashLinear);

// Pops `name` and adds it to its Linear's output.
struct PopAddImpl : nn::Cloneable<PopAddImpl> {
  PopAddImpl(std::string name, int64_t width) : name_(std::move(name)), width_(width) { reset(); }
  void reset() override { fc_ = register_module("fc", nn::Linear(width_, width_)); }
  Batch forward(Batch b) {
    at::Tensor skip = b.skips.at(name_);
    b.skips.erase(name_);
    b.value() = fc_->forward(b.value()) + 2 * skip;
    return b;
  }
  std::string name_;
  int64_t width_;
  nn::Linear fc_{nullptr};
};
TORCH_MODULE(PopAdd);

// Takes two tensors {x, y}: returns {x * W + y, y}.
struct TwoInputImpl : nn::Cloneable<TwoInputImpl> {
  explicit TwoInputImpl(int64_t width) : width_(width) { reset(); }
  void reset() override { fc_ = register_module("fc", nn::Linear(width_, width_)); }
  Batch forward(Batch b) {
    b.tensors[0] = torch::relu(fc_->forward(b.tensors[0]) + b.tensors[1]);
    return b;
  }
  int64_t width_;
  nn::Linear fc_{nullptr};
};
TORCH_MODULE(TwoInput);

// Drops every tensor but the first.
struct FirstOnlyImpl : nn::Cloneable<FirstOnlyImpl> {
  void reset() override {}
  Batch forward(Batch b) {
    b.tensors.resize(1);
    return b;
  }
};
TORCH_MODULE(FirstOnly);

constexpr int64_t kWidth = 6;

// Eight layers: two inputs, a skip that crosses stages, dropout-free.
inline LayerSeq make_model(uint64_t seed) {
  torch::manual_seed(seed);
  LayerSeq seq("test");
  seq.add(make_layer("two", "TwoInput", TwoInput(kWidth), LayerIO::kBatch));
  seq.add(make_layer("first", "FirstOnly", FirstOnly(), LayerIO::kBatch));
  auto stash = make_layer("stash", "StashLinear", StashLinear("s", kWidth), LayerIO::kBatch);
  stash->set_skips({"s"}, {});
  seq.add(std::move(stash));
  seq.add(make_layer("fc3", "Linear", nn::Linear(kWidth, kWidth)));
  seq.add(make_layer("act4", "Tanh", nn::Tanh()));
  seq.add(make_layer("fc5", "Linear", nn::Linear(kWidth, kWidth)));
  auto pop = make_layer("pop", "PopAdd", PopAdd("s", kWidth), LayerIO::kBatch);
  pop->set_skips({}, {"s"});
  seq.add(std::move(pop));
  seq.add(make_layer("head", "Linear", nn::Linear(kWidth, 3)));
  seq.to(torch::kDouble);
  return seq;
}

inline at::Tensor mse(const at::Tensor& out, const at::Tensor& target) {
  return torch::mse_loss(out, target);
}

struct Reference {
  double loss;
  std::vector<at::Tensor> grads;
};

inline Reference plain_step(const LayerSeq& model, const Batch& input, const at::Tensor& target) {
  const at::Tensor loss = mse(model.forward(input).value(), target);
  loss.backward();
  Reference ref{loss.item<double>(), {}};
  for (const auto& p : model.parameters()) ref.grads.push_back(p.grad().clone());
  return ref;
}

}  // namespace pipebal::pipeline::testing
