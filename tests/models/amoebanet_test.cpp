// AmoebaNet-D zoo model: layer structure, per-cell shapes (which pin down the genotype's
// concatenations and strides), gradients, clone, input and option checks.
#include "pipebal/models/amoebanet.h"

#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "pipebal/pipeline/layer_seq.h"
#include "tests/models/model_test_support.h"

namespace pipebal::models {
namespace {

AmoebaNetOptions small_options() {
  AmoebaNetOptions options;
  options.L = 1;
  options.D = 8;
  return options;
}

at::Tensor small_input() {
  return torch::randn({2, 3, 32, 32});
}

TEST(AmoebaNet, LayersAreNamedAndTyped) {
  AmoebaNetOptions options = small_options();
  options.L = 2;
  const pipeline::LayerSeq seq = make_amoebanet(options);
  const std::vector<std::string> names = {"stem",    "reduce0", "reduce1", "cell0",
                                          "cell1",   "reduce2", "cell2",   "cell3",
                                          "reduce3", "cell4",   "cell5",   "head"};
  ASSERT_EQ(seq.size(), names.size());  // 3L + 6
  for (size_t i = 0; i < seq.size(); ++i) {
    const std::string& name = seq[i].name();
    EXPECT_EQ(name, names[i]);
    const std::string expected_type = name == "stem"                 ? "Stem"
                                      : name == "head"               ? "Classifier"
                                      : name.rfind("reduce", 0) == 0 ? "ReductionCell"
                                                                     : "NormalCell";
    EXPECT_EQ(seq[i].type(), expected_type) << name;
  }
}

TEST(AmoebaNet, ForwardBackwardGivesShapeAndFiniteGradients) {
  torch::manual_seed(0);
  const pipeline::LayerSeq seq = make_amoebanet(small_options());
  const pipeline::Batch out = seq.forward(pipeline::Batch(small_input()));
  ASSERT_EQ(out.tensors.size(), 1u);  // the head drops s1
  EXPECT_EQ(out.value().sizes(), (std::vector<int64_t>{2, 10}));

  torch::nn::functional::cross_entropy(out.value(), torch::tensor({1, 7}, torch::kLong)).backward();
  int nonzero = 0;
  for (const auto& p : seq.parameters()) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_TRUE(torch::isfinite(p.grad()).all().item<bool>());
    if (p.grad().abs().sum().item<double>() > 0) ++nonzero;
  }
  EXPECT_GT(nonzero, static_cast<int>(seq.parameters().size()) / 2);
}

// Normal cells concatenate 4 states, reduction cells 3 at half the size; branch channels
// double at every reduction after the stem's. Every cell passes its input s1 on as s0.
TEST(AmoebaNet, CellsCarryTwoTensorsWithGenotypeShapes) {
  torch::manual_seed(0);
  const pipeline::LayerSeq seq = make_amoebanet(small_options());
  using Shape = std::vector<int64_t>;
  const std::vector<Shape> outputs = {
      {2, 2, 16, 16},  // stem: D/4
      {2, 12, 8, 8},   // reduce0: 3 x D/2
      {2, 24, 4, 4},   // reduce1: 3 x D
      {2, 32, 4, 4},   // cell0: 4 x D
      {2, 48, 2, 2},   // reduce2: 3 x 2D
      {2, 64, 2, 2},   // cell1: 4 x 2D
      {2, 96, 1, 1},   // reduce3: 3 x 4D
      {2, 128, 1, 1},  // cell2: 4 x 4D
      {2, 10},         // head
  };
  ASSERT_EQ(seq.size(), outputs.size());
  pipeline::Batch batch(small_input());
  for (size_t i = 0; i < seq.size(); ++i) {
    const at::Tensor previous = batch.value();
    batch = seq[i].forward(std::move(batch));
    EXPECT_EQ(batch.value().sizes(), outputs[i]) << "after " << seq[i].name();
    if (seq[i].type() == "NormalCell" || seq[i].type() == "ReductionCell") {
      ASSERT_EQ(batch.tensors.size(), 2u) << seq[i].name();
      EXPECT_TRUE(batch.tensors[1].is_same(previous)) << seq[i].name();
    } else {
      EXPECT_EQ(batch.tensors.size(), 1u) << seq[i].name();
    }
  }
}

TEST(AmoebaNet, HasNoSkipTensors) {
  const pipeline::LayerSeq seq = make_amoebanet(small_options());
  EXPECT_NO_THROW(seq.check_skips());
  for (size_t i = 0; i < seq.size(); ++i) {
    EXPECT_TRUE(seq[i].stashes().empty());
    EXPECT_TRUE(seq[i].pops().empty());
  }
}

TEST(AmoebaNet, StagesGiveTheSameOutputAsTheWhole) {
  torch::manual_seed(1);
  const pipeline::LayerSeq seq = make_amoebanet(small_options());
  seq.train(false);
  const at::Tensor input = small_input();
  const at::Tensor whole = seq.forward(pipeline::Batch(input)).value();
  for (size_t cut = 1; cut < seq.size(); ++cut) {
    pipeline::Batch middle = seq.slice(0, cut).forward(pipeline::Batch(input));
    const at::Tensor parts = seq.slice(cut, seq.size() - cut).forward(std::move(middle)).value();
    EXPECT_TRUE(torch::equal(parts, whole)) << "cut before layer " << cut;
  }
}

TEST(AmoebaNet, CloneIsEqualAndDeep) {
  torch::manual_seed(2);
  const pipeline::LayerSeq seq = make_amoebanet(small_options());
  const at::Tensor input = small_input();
  seq.forward(pipeline::Batch(input));  // moves the batch norm running statistics
  const pipeline::LayerSeq copy = seq.clone();
  ASSERT_EQ(copy.size(), seq.size());
  EXPECT_EQ(copy.parameter_count(), seq.parameter_count());
  expect_equal_deep_clone(seq, copy, input);
}

TEST(AmoebaNet, RejectsInputNotDivisibleBy32) {
  const pipeline::LayerSeq seq = make_amoebanet(small_options());
  expect_invalid_argument(
      [&] {
        seq.forward(pipeline::Batch(torch::randn({2, 3, 48, 32})));
      },
      {"'stem'", "[2, 3, 48, 32]", "divisible by 32"});
  expect_invalid_argument(
      [&] {
        seq.forward(pipeline::Batch(torch::randn({2, 1, 32, 32})));
      },
      {"'stem'", "[2, 1, 32, 32]", "[N, 3, H, W]"});
}

TEST(AmoebaNet, CellRejectsTooManyTensors) {
  const pipeline::LayerSeq seq = make_amoebanet(small_options());
  const at::Tensor x = torch::randn({2, 2, 16, 16});
  expect_invalid_argument(
      [&] {
        seq[1].forward(pipeline::Batch({x, x, x}));
      },
      {"'reduce0'", "got 3"});
}

TEST(AmoebaNet, RejectsBadOptions) {
  AmoebaNetOptions options = small_options();
  options.L = 0;
  expect_invalid_argument([&] { make_amoebanet(options); }, {"L must be"});
  options = small_options();
  options.D = 12;
  expect_invalid_argument([&] { make_amoebanet(options); }, {"D must be", "12"});
  options = small_options();
  options.classes = 0;
  expect_invalid_argument([&] { make_amoebanet(options); }, {"classes"});
}

// GPipe (Huang et al. 2019), Table 1: AmoebaNet-D (18, 208) for ImageNet has 82M parameters.
// Its L = 18 counts all normal cells, i.e. 6 per group here; an independent check of the
// genotype and of the channel bookkeeping between cells.
TEST(AmoebaNet, ParameterCountMatchesGPipePaper) {
  AmoebaNetOptions options;
  options.L = 6;
  options.D = 208;
  options.classes = 1000;
  const int64_t count = make_amoebanet(options).parameter_count();
  EXPECT_NEAR(static_cast<double>(count), 82e6, 0.5e6);
}

}  // namespace
}  // namespace pipebal::models
