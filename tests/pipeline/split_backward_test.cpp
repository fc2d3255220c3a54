// A backward split into B and W: B computes the input's gradient and no weight gradient, W the
// weight gradients and nothing of B's again, and together they equal one whole backward.
#include "pipebal/pipeline/split_backward.h"

#include <functional>
#include <set>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace pipebal::pipeline {
namespace {

namespace nn = torch::nn;

// The identity, counting how often autograd runs its backward: placed on the input's path, it
// shows whether W went along that path again.
struct CountingIdentity : torch::autograd::Function<CountingIdentity> {
  static int backward_calls;
  static at::Tensor forward(torch::autograd::AutogradContext*, const at::Tensor& x) {
    return x.clone();
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                 torch::autograd::variable_list grads) {
    ++backward_calls;
    return grads;
  }
};
int CountingIdentity::backward_calls = 0;

// The identity, running a check when autograd passes it going back: nearer the input than
// another node, it sees what that node still holds once it has run.
struct Probe : torch::autograd::Function<Probe> {
  static std::function<void()> on_backward;
  static at::Tensor forward(torch::autograd::AutogradContext*, const at::Tensor& x) {
    return x.clone();
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                 torch::autograd::variable_list grads) {
    if (on_backward) on_backward();
    return grads;
  }
};
std::function<void()> Probe::on_backward;

struct Net {
  nn::Linear first{nn::Linear(6, 5)}, second{nn::Linear(5, 4)};
  std::vector<at::Tensor> params() {
    std::vector<at::Tensor> out = first->parameters();
    for (const auto& p : second->parameters()) out.push_back(p);
    return out;
  }
  at::Tensor forward(const at::Tensor& x) {
    return second->forward(CountingIdentity::apply(torch::tanh(first->forward(x))));
  }
};

TEST(SplitBackward, BAndWTogetherEqualTheWholeBackwardAndNeitherRepeatsTheOther) {
  torch::manual_seed(3);
  Net net;
  for (auto& p : net.params()) p.set_data(p.to(torch::kDouble));
  const at::Tensor x0 = torch::randn({7, 6}, torch::kDouble);
  const at::Tensor grad = torch::randn({7, 4}, torch::kDouble);

  // Reference: one whole backward.
  at::Tensor x = x0.clone().requires_grad_(true);
  torch::autograd::backward({net.forward(x)}, {grad});
  std::vector<at::Tensor> expected;
  for (const auto& p : net.params()) {
    expected.push_back(p.grad().clone());
    p.mutable_grad() = at::Tensor();
  }
  const at::Tensor expected_input_grad = x.grad().clone();

  x = x0.clone().requires_grad_(true);
  const at::Tensor y = net.forward(x);
  CountingIdentity::backward_calls = 0;
  SplitBackward split({y}, {grad}, {x}, net.params());
  EXPECT_TRUE(split.weight_deferred());
  ASSERT_TRUE(split.input_grads()[0].defined());
  EXPECT_TRUE(torch::allclose(split.input_grads()[0], expected_input_grad, 1e-12, 1e-14));
  for (const auto& p : net.params()) EXPECT_FALSE(p.grad().defined()) << "B computed a weight";
  EXPECT_EQ(CountingIdentity::backward_calls, 1);

  split.run_weight();
  EXPECT_EQ(CountingIdentity::backward_calls, 1) << "W ran the input's path again";
  const auto params = net.params();
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_TRUE(params[i].grad().defined()) << "parameter " << i;
    EXPECT_TRUE(torch::allclose(params[i].grad(), expected[i], 1e-12, 1e-14)) << "parameter " << i;
  }
  split.run_weight();  // once only
  EXPECT_TRUE(torch::allclose(params[0].grad(), expected[0], 1e-12, 1e-14));
}

// B keeps the graph for W, but what only the input's path saved goes as B passes it, as in a
// backward that does not keep its graph: B then peaks no higher than a whole backward plus
// the gradients it keeps.
TEST(SplitBackward, BFreesWhatTheInputPathSavedAsItPasses) {
  torch::manual_seed(6);
  Net net;
  const at::Tensor x = torch::randn({7, 6}).requires_grad_(true);
  c10::Storage exp_result;
  at::Tensor y;
  {
    const at::Tensor e = torch::exp(Probe::apply(net.first->forward(x)));  // exp saves e
    exp_result = e.storage();
    y = net.second->forward(e * 2);
  }
  EXPECT_EQ(exp_result.use_count(), 2u) << "exp's backward should hold its result until B";
  size_t during_b = 0;
  Probe::on_backward = [&] { during_b = exp_result.use_count(); };
  SplitBackward split({y}, {torch::ones_like(y)}, {x}, net.params());
  Probe::on_backward = nullptr;
  EXPECT_EQ(during_b, 1u) << "exp's saved result outlived its node's run inside B";
  EXPECT_TRUE(split.weight_deferred());
  split.run_weight();  // W did not need it
  EXPECT_TRUE(net.params()[0].grad().defined());
}

// Whether `target` is reachable from `from` along the graph's edges.
bool reaches(torch::autograd::Node* from, const torch::autograd::Node* target) {
  std::vector<torch::autograd::Node*> stack{from};
  std::set<torch::autograd::Node*> seen;
  while (!stack.empty()) {
    torch::autograd::Node* node = stack.back();
    stack.pop_back();
    if (node == target) return true;
    if (!seen.insert(node).second) continue;
    for (const auto& edge : node->next_edges()) {
      if (edge.is_valid()) stack.push_back(edge.function.get());
    }
  }
  return false;
}

// Once B is done, W's runs see only the kept nodes' parameter branches: nothing of the input's
// path stays reachable from them, so autograd, which walks every node below a run's root
// before running it, does not walk the rest of the stage for each of W's runs.
TEST(SplitBackward, AfterBWReachesNothingOfTheInputPathAndStaysExact) {
  torch::manual_seed(7);
  Net net;
  for (auto& p : net.params()) p.set_data(p.to(torch::kDouble));
  const at::Tensor x0 = torch::randn({5, 6}, torch::kDouble);
  at::Tensor x = x0.clone().requires_grad_(true);
  torch::autograd::backward({net.forward(x)}, {torch::ones({5, 4}, torch::kDouble)});
  std::vector<at::Tensor> expected;
  for (const auto& p : net.params()) {
    expected.push_back(p.grad().clone());
    p.mutable_grad() = at::Tensor();
  }

  x = x0.clone().requires_grad_(true);
  const at::Tensor t = torch::tanh(net.first->forward(x));
  const at::Tensor p = Probe::apply(t);  // between the two Linears: on the input's path only
  const at::Tensor y = net.second->forward(p);
  const auto second_weight = torch::autograd::impl::try_get_grad_accumulator(net.second->weight);
  ASSERT_TRUE(reaches(y.grad_fn().get(), p.grad_fn().get()));
  SplitBackward split({y}, {torch::ones_like(y)}, {x}, net.params());
  EXPECT_TRUE(split.weight_deferred());
  // The second Linear's node is where W starts for its weight.
  EXPECT_TRUE(reaches(y.grad_fn().get(), second_weight.get()));
  EXPECT_FALSE(reaches(y.grad_fn().get(), p.grad_fn().get())) << "W walks the input's path";
  EXPECT_FALSE(reaches(y.grad_fn().get(), t.grad_fn().get())) << "W walks the input's path";
  split.run_weight();
  const auto params = net.params();
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_TRUE(params[i].grad().defined()) << "parameter " << i;
    EXPECT_TRUE(torch::allclose(params[i].grad(), expected[i], 1e-12, 1e-14)) << "parameter " << i;
  }
}

TEST(SplitBackward, WithoutAnInputGradientWIsTheWholeBackward) {
  torch::manual_seed(4);
  Net net;
  const at::Tensor x = torch::randn({3, 6});  // the first stage's data: no gradient
  const at::Tensor y = net.forward(x);
  SplitBackward split({y}, {torch::ones_like(y)}, {x}, net.params());
  EXPECT_FALSE(split.input_grads()[0].defined());
  EXPECT_FALSE(net.params()[0].grad().defined());
  split.run_weight();
  EXPECT_TRUE(net.params()[0].grad().defined());
  EXPECT_GT(net.params()[0].grad().abs().sum().item<double>(), 0);
}

// There W is the whole backward, and like one that does not keep its graph it frees what each
// node saved once the node has run, and the outputs' gradients once used.
TEST(SplitBackward, WithoutAnInputGradientWFreesAsItWalksDown) {
  torch::manual_seed(4);
  Net net;
  const at::Tensor x = torch::randn({3, 6});
  c10::Storage exp_result;
  at::Tensor y;
  {
    const at::Tensor e = torch::exp(Probe::apply(net.first->forward(x)));  // exp saves e
    exp_result = e.storage();
    y = net.second->forward(e * 2);
  }
  at::Tensor grad = torch::ones_like(y);
  const c10::Storage grad_storage = grad.storage();
  SplitBackward split({y}, {std::move(grad)}, {x}, net.params());
  size_t saved_during_w = 0, grad_during_w = 0;
  Probe::on_backward = [&] {
    saved_during_w = exp_result.use_count();
    grad_during_w = grad_storage.use_count();
  };
  split.run_weight();
  Probe::on_backward = nullptr;
  EXPECT_EQ(saved_during_w, 1u) << "exp's saved result outlived its node's run inside W";
  EXPECT_EQ(grad_during_w, 1u) << "the output's gradient outlived its use inside W";
  EXPECT_TRUE(net.params()[0].grad().defined());
}

// A weight used on both sides of a layer whose input gradient is needed (tied weights): W from
// B's kept gradient would count part of it twice, so B does the whole backward.
TEST(SplitBackward, ATiedWeightIsNotSplitAndStaysExact) {
  torch::manual_seed(5);
  const at::Tensor w = torch::randn({4, 4}, torch::kDouble).requires_grad_(true);
  const at::Tensor x0 = torch::randn({2, 4}, torch::kDouble);
  auto forward = [&](const at::Tensor& x) { return torch::tanh(x.mm(w)).mm(w); };
  at::Tensor x = x0.clone().requires_grad_(true);
  forward(x).sum().backward();
  const at::Tensor expected = w.grad().clone();
  w.mutable_grad() = at::Tensor();

  x = x0.clone().requires_grad_(true);
  const at::Tensor y = forward(x);
  SplitBackward split({y}, {torch::ones_like(y)}, {x}, {w});
  EXPECT_FALSE(split.weight_deferred());
  split.run_weight();
  EXPECT_TRUE(torch::allclose(w.grad(), expected, 1e-12, 1e-14));
  EXPECT_TRUE(split.input_grads()[0].defined());
}

}  // namespace
}  // namespace pipebal::pipeline
