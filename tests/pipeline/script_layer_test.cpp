// TorchScript models made in Python load as layer sequences and reproduce Python's output.
#include "pipebal/pipeline/script_layer.h"

#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/torch.h>

namespace pipebal::pipeline {
namespace {

const std::string kFixtures = PIPEBAL_FIXTURES_DIR;

struct Expected {
  at::Tensor input;
  at::Tensor output;
};

Expected load_expected(const std::string& name) {
  torch::jit::Module holder = torch::jit::load(kFixtures + "/" + name + ".expected.pt");
  return {holder.attr("input").toTensor(), holder.attr("expected").toTensor()};
}

class ScriptFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(ScriptFixture, LayersReproducePythonOutput) {
  LayerSeq seq = load_torchscript(kFixtures + "/" + GetParam() + ".pt");
  const Expected expected = load_expected(GetParam());
  seq.train(false);
  torch::NoGradGuard no_grad;
  const at::Tensor out = seq.forward(Batch(expected.input)).value();
  EXPECT_TRUE(torch::allclose(out, expected.output, 1e-5, 1e-6));
}

TEST_P(ScriptFixture, BackwardReachesEveryParameterAndCloneIsDeep) {
  LayerSeq seq = load_torchscript(kFixtures + "/" + GetParam() + ".pt");
  const Expected expected = load_expected(GetParam());
  LayerSeq copy = seq.clone();
  seq.forward(Batch(expected.input)).value().sum().backward();
  for (const auto& p : seq.parameters()) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_TRUE(torch::isfinite(p.grad()).all().item<bool>());
  }
  for (const auto& p : copy.parameters()) {
    EXPECT_TRUE(p.is_leaf());
    EXPECT_TRUE(p.requires_grad());
    EXPECT_FALSE(p.grad().defined());
  }
  {
    torch::NoGradGuard no_grad;
    copy.parameters()[0].add_(1.0);
  }
  EXPECT_FALSE(torch::equal(copy.parameters()[0], seq.parameters()[0]));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ScriptFixture,
                         ::testing::Values("sequential_mlp_scripted", "sequential_cnn_traced",
                                           "sequential_dropout_scripted",
                                           "dropout_kinds_scripted"));

TEST(ScriptLayer, ChildrenBecomeNamedTypedLayers) {
  LayerSeq seq = load_torchscript(kFixtures + "/sequential_mlp_scripted.pt");
  ASSERT_EQ(seq.size(), 5u);
  EXPECT_EQ(seq[0].name(), "0");
  EXPECT_EQ(seq[0].type(), "Linear");
  EXPECT_EQ(seq[1].type(), "ReLU");
  EXPECT_TRUE(seq[0].is_training());
}

// Only a dropout that can drop makes a stage random (and then its micro-batches are seeded).
TEST(ScriptLayer, DropoutWithZeroProbabilityIsNotStochastic) {
  LayerSeq seq = load_torchscript(kFixtures + "/sequential_dropout_scripted.pt");
  ASSERT_EQ(seq.size(), 4u);
  EXPECT_FALSE(seq[0].is_stochastic());
  EXPECT_FALSE(seq[1].is_stochastic()) << "Dropout(p=0)";
  EXPECT_TRUE(seq[3].is_stochastic()) << "Dropout(p=0.3)";
  seq[3].train(false);
  EXPECT_FALSE(seq[3].is_stochastic()) << "in eval mode";
}

TEST(ScriptLayer, MissingFileIsAClearError) {
  try {
    load_torchscript("/nonexistent/model.pt");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("cannot load TorchScript model '/nonexistent/model.pt'"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace pipebal::pipeline
