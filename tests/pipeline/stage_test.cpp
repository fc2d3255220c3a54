// A stage's backward for inputs it passes on: a skip tensor it only carries gets back the very
// gradient the stage received (no copy held beside it), one it also reads gets both parts. And
// what it holds through its backward: its outputs and the gradient it received go as soon as
// autograd is done with them, as a layer's inside the stage do.
#include "pipebal/pipeline/stage.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "pipebal/pipeline/module_layer.h"

namespace pipebal::pipeline {
namespace {

namespace nn = torch::nn;

// x -> tanh(W x) + reads * s, with the skip `s` passed on untouched either way.
struct CarryImpl : nn::Cloneable<CarryImpl> {
  explicit CarryImpl(bool reads) : reads_(reads) { reset(); }
  void reset() override { fc_ = register_module("fc", nn::Linear(4, 4)); }
  Batch forward(Batch b) {
    at::Tensor out = torch::tanh(fc_->forward(b.value()));
    if (reads_) out = out + 3 * b.skips.at("s");
    b.value() = out;
    return b;
  }
  bool reads_;
  nn::Linear fc_{nullptr};
};
TORCH_MODULE(Carry);

Stage carrying_stage(bool reads) {
  torch::manual_seed(3);
  LayerSeq seq("carry");
  seq.add(make_layer("carry", "Carry", Carry(reads), LayerIO::kBatch));
  seq.to(torch::kDouble);
  return Stage(1, 0, std::move(seq), c10::Device("cpu"));
}

Batch input_batch() {
  Batch input;
  input.tensors.push_back(torch::randn({2, 4}, torch::kDouble));
  input.skips["s"] = torch::randn({2, 4}, torch::kDouble);
  return input;
}

Batch output_gradient() {
  Batch grad;
  grad.tensors.push_back(torch::randn({2, 4}, torch::kDouble));
  grad.skips["s"] = torch::randn({2, 4}, torch::kDouble);
  return grad;
}

Batch backward(Stage& stage, const Batch& input, const Batch& grad, bool split) {
  Stage::ForwardMode mode;
  mode.track_input_grad = true;
  stage.forward(0, input, mode);
  Batch input_grads = stage.backward(0, grad, split);
  if (split) stage.weight(0);
  return input_grads;
}

TEST(Stage, ACarriedSkipGetsBackTheGradientItReceivedWithoutACopy) {
  for (const bool split : {false, true}) {
    Stage stage = carrying_stage(/*reads=*/false);
    torch::manual_seed(5);
    const Batch input = input_batch();
    const Batch grad = output_gradient();
    const Batch input_grads = backward(stage, input, grad, split);
    const at::Tensor& sent = input_grads.skips.at("s");
    EXPECT_EQ(sent.data_ptr(), grad.skips.at("s").data_ptr()) << "split " << split;
    EXPECT_TRUE(torch::equal(sent, grad.skips.at("s")));
    ASSERT_TRUE(input_grads.value().defined());
    EXPECT_NE(input_grads.value().data_ptr(), grad.value().data_ptr());
  }
}

TEST(Stage, ASkipReadAndCarriedGetsBothGradients) {
  for (const bool split : {false, true}) {
    Stage stage = carrying_stage(/*reads=*/true);
    torch::manual_seed(5);
    const Batch input = input_batch();
    const Batch grad = output_gradient();
    const Batch input_grads = backward(stage, input, grad, split);

    // The reference: the same layer under plain autograd, the carried skip an output too.
    at::Tensor x = input.value().clone().requires_grad_(true);
    at::Tensor s = input.skips.at("s").clone().requires_grad_(true);
    Batch plain;
    plain.tensors.push_back(x);
    plain.skips["s"] = s;
    Batch out = stage.layers().forward(plain);
    torch::autograd::backward({out.value(), out.skips.at("s")}, {grad.value(), grad.skips.at("s")});
    EXPECT_TRUE(torch::allclose(input_grads.skips.at("s"), s.grad(), 0, 1e-12))
        << "split " << split;
    EXPECT_TRUE(torch::allclose(input_grads.value(), x.grad(), 0, 1e-12)) << "split " << split;
    EXPECT_FALSE(torch::allclose(s.grad(), grad.skips.at("s")));  // the read part counts
  }
}

// Two linear layers (addmm saves its input, not its output): whether the stage's output and the
// gradient it received are still alive when the first layer's backward runs.
using WeakTensor = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;

struct Liveness {
  bool output = true;
  bool gradient = true;
};

Liveness liveness_in_backward(bool last) {
  torch::manual_seed(7);
  nn::Linear first(4, 4);
  LayerSeq seq("two");
  seq.add(make_layer("first", "Linear", first));
  seq.add(make_layer("second", "Linear", nn::Linear(4, 4)));
  Stage stage(last ? 1 : 0, 0, std::move(seq), c10::Device("cpu"));
  Stage::ForwardMode mode;
  mode.track_input_grad = true;
  Batch output = stage.forward(0, Batch(torch::randn({2, 4})), mode);
  const WeakTensor output_handle(output.value().getIntrusivePtr());
  output = Batch();  // sent on: the stage's own handle is all there is
  Batch received(torch::randn({2, 4}));
  const WeakTensor gradient_handle(received.value().getIntrusivePtr());
  Liveness seen;
  first->weight.register_hook([&](const at::Tensor&) {
    seen.output = !output_handle.expired();
    seen.gradient = !gradient_handle.expired();
  });
  if (last) {
    const auto mse = [](const at::Tensor& out, const at::Tensor& target) {
      return torch::mse_loss(out, target);
    };
    double loss = 0;
    stage.backward_from_loss(0, torch::randn({2, 4}), mse, 1.0, &loss);
  } else {
    stage.backward(0, std::move(received));
  }
  return seen;
}

TEST(Stage, ItsOutputAndTheGradientItReceivedGoOnceTheBackwardUsedThem) {
  const Liveness seen = liveness_in_backward(/*last=*/false);
  EXPECT_FALSE(seen.output);
  EXPECT_FALSE(seen.gradient);
}

TEST(Stage, TheLastStagesOutputGoesOnceTheLossNoLongerNeedsIt) {
  EXPECT_FALSE(liveness_in_backward(/*last=*/true).output);  // mse_loss's backward ran first
}

}  // namespace
}  // namespace pipebal::pipeline
