// LayerSeq: running, slicing, deep clones and skip-tensor bookkeeping.
#include "pipebal/pipeline/layer_seq.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "pipebal/pipeline/dropout.h"
#include "pipebal/pipeline/module_layer.h"

namespace pipebal::pipeline {
namespace {

LayerSeq small_mlp() {
  torch::manual_seed(0);
  LayerSeq seq("test");
  seq.add(make_layer("fc0", "Linear", torch::nn::Linear(4, 8)));
  seq.add(make_layer("act", "ReLU", torch::nn::ReLU()));
  seq.add(make_layer("fc1", "Linear", torch::nn::Linear(8, 2)));
  return seq;
}

TEST(LayerSeq, ForwardEqualsHandWrittenComputation) {
  LayerSeq seq = small_mlp();
  const auto x = torch::randn({3, 4});
  const auto p = seq.parameters();  // fc0.weight, fc0.bias, fc1.weight, fc1.bias
  ASSERT_EQ(p.size(), 4u);
  const auto expected = torch::relu(x.matmul(p[0].t()) + p[1]).matmul(p[2].t()) + p[3];
  EXPECT_TRUE(torch::allclose(seq.forward(Batch(x)).value(), expected));
  EXPECT_EQ(seq.parameter_count(), 4 * 8 + 8 + 8 * 2 + 2);
}

TEST(LayerSeq, CloneIsDeep) {
  LayerSeq original = small_mlp();
  LayerSeq copy = original.clone();
  const auto before = original.parameters()[0].clone();
  {
    torch::NoGradGuard no_grad;
    copy.parameters()[0].add_(1.0);
  }
  EXPECT_TRUE(torch::equal(original.parameters()[0], before));
  EXPECT_FALSE(torch::equal(copy.parameters()[0], before));
  EXPECT_EQ(copy.size(), original.size());
  EXPECT_EQ(copy[2].name(), "fc1");
}

TEST(LayerSeq, CloneKeepsTrainingModeAndSkipDeclarations) {
  LayerSeq seq = small_mlp();
  seq[0].set_skips({"a"}, {});
  seq.train(false);
  LayerSeq copy = seq.clone();
  EXPECT_FALSE(copy[0].is_training());
  EXPECT_EQ(copy[0].stashes(), std::vector<std::string>{"a"});
}

TEST(Layer, OnlyDropoutThatCanDropIsStochastic) {
  namespace nn = torch::nn;
  EXPECT_TRUE(make_layer("d", "Dropout", nn::Dropout(0.5))->is_stochastic());
  EXPECT_TRUE(make_layer("d", "Dropout2d", nn::Dropout2d(0.1))->is_stochastic());
  EXPECT_FALSE(make_layer("d", "Dropout", nn::Dropout(0.0))->is_stochastic());
  EXPECT_FALSE(make_layer("fc", "Linear", nn::Linear(2, 2))->is_stochastic());
  // RReLU draws its slopes in training mode.
  EXPECT_TRUE(make_layer("r", "RReLU", nn::RReLU())->is_stochastic());
  EXPECT_TRUE(make_layer("r", "RReLU", nn::RReLU())->draws_from_shared_generator());
  // pipebal's Dropout draws from the stage's own generator, LibTorch's from the shared one.
  EXPECT_TRUE(make_layer("d", "Dropout", nn::Dropout(0.5))->draws_from_shared_generator());
  const auto own = make_layer("d", "Dropout", Dropout(0.5));
  EXPECT_TRUE(own->is_stochastic());
  EXPECT_FALSE(own->draws_from_shared_generator());
  EXPECT_FALSE(make_layer("d", "Dropout", Dropout(0.0))->is_stochastic());
  auto nested = make_layer("seq", "Sequential", nn::Sequential(nn::Linear(2, 2), nn::Dropout(0.2)));
  EXPECT_TRUE(nested->is_stochastic());
  nested->train(false);
  EXPECT_FALSE(nested->is_stochastic()) << "in eval mode";
}

TEST(LayerSeq, SliceSharesLayersAndChecksRange) {
  LayerSeq seq = small_mlp();
  LayerSeq tail = seq.slice(1, 2);
  ASSERT_EQ(tail.size(), 2u);
  EXPECT_EQ(&tail[0], &seq[1]);
  EXPECT_THROW(seq.slice(2, 2), std::invalid_argument);
}

TEST(LayerSeq, CheckSkipsRejectsPopWithoutStash) {
  LayerSeq seq = small_mlp();
  seq[2].set_skips({}, {"enc"});
  try {
    seq.check_skips();
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("'fc1'"), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("'enc'"), std::string::npos);
  }
  seq[0].set_skips({"enc"}, {});
  EXPECT_NO_THROW(seq.check_skips());
}

}  // namespace
}  // namespace pipebal::pipeline
