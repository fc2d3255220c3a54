// The checks a training run makes of --data's targets before its first step, against outputs
// and targets made here.
#include "pipebal/workflow/run_checks.h"

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "pipebal/models/zoo.h"

namespace pipebal::workflow {
namespace {

using models::LossKind;

models::Dataset with_targets(at::Tensor targets) {
  models::Dataset data;
  data.inputs = {torch::zeros({targets.size(0), 3})};
  data.targets = std::move(targets);
  return data;
}

std::string error_of(const models::Dataset& data, LossKind loss, const at::Tensor& output) {
  try {
    check_targets(data, loss, output, "d.pt");
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "(no error)";
}

std::string dtype_error_of(const models::Dataset& data, const pipeline::LayerSeq& layers) {
  try {
    check_data_dtype(data, layers, "t.pt");
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "(no error)";
}

// Scores for 4 classes, one row per sample (the model's output on one sample).
const at::Tensor kScores = torch::zeros({1, 4});

// Token ids saved as floats meet an embedding: int64 is the advice, not the weights' dtype.
TEST(CheckDataDtype, FloatingIdsForAnEmbeddingAskForIntegers) {
  const models::Model gpt = models::build_model("gpt:layers=1,dim=16,heads=2,seq=8,vocab=50", 0);
  models::Dataset data;
  data.inputs = {torch::zeros({4, 8}, torch::kDouble)};
  data.targets = torch::zeros({4, 8}, torch::kLong);
  EXPECT_EQ(dtype_error_of(data, gpt.layers),
            "--data t.pt's inputs are float64, but the model's first layer (Embedding) takes "
            "integer ids: save them as int64 (ids.long())");
  data.inputs = {torch::zeros({4, 8}, torch::kLong)};
  EXPECT_EQ(dtype_error_of(data, gpt.layers), "(no error)");
}

// Integers into a linear or convolutional first layer (pixels saved as bytes, ids for another
// model): refused with the dtype to save them as; into an embedding they are its ids.
TEST(CheckDataDtype, IntegerDataForALinearFirstLayerAsksForFloatingPoint) {
  const models::Model mlp = models::build_model("mlp:layers=2,width=8", 0);
  models::Dataset data;
  data.inputs = {torch::zeros({4, 8}, torch::kLong)};
  data.targets = torch::zeros({4}, torch::kLong);
  EXPECT_EQ(dtype_error_of(data, mlp.layers),
            "--data t.pt's inputs are int64, but the model's first layer (LinearReLU) multiplies "
            "them with its float32 weights: save them as float32 (x.to(torch.float32), scaled as "
            "the model was trained on)");
  const models::Model gpt = models::build_model("gpt:layers=1,dim=8,heads=2,seq=8,vocab=16", 0);
  EXPECT_EQ(dtype_error_of(data, gpt.layers), "(no error)") << "ids into an embedding";
}

// Complex data meets real weights: no --dtype makes it real, so the advice is to save it so.
TEST(CheckDataDtype, ComplexDataForARealModelAsksForRealData) {
  const models::Model mlp = models::build_model("mlp:layers=2,width=8", 0);
  models::Dataset data;
  data.inputs = {torch::zeros({4, 8}, torch::kComplexFloat)};
  data.targets = torch::zeros({4}, torch::kLong);
  EXPECT_EQ(dtype_error_of(data, mlp.layers),
            "--data t.pt's inputs are complex64, the model's first layer's parameters float32: "
            "save them as float32 (x.real, or torch.view_as_real(x) for both parts as a last "
            "dimension of 2)");
  data.inputs = {torch::zeros({4, 8})};
  data.targets = torch::zeros({4, 10}, torch::kComplexDouble);
  EXPECT_EQ(dtype_error_of(data, mlp.layers),
            "--data t.pt's targets are complex128, the model's last layer's parameters float32: "
            "save them as float32 (x.real, or torch.view_as_real(x) for both parts as a last "
            "dimension of 2)");
  data.targets = torch::zeros({4}, torch::kLong);
  EXPECT_EQ(dtype_error_of(data, mlp.layers), "(no error)");
}

TEST(LeftOutBatch, OnlyALastMiniBatchTooSmallForTheMicroBatchesIsLeftOut) {
  EXPECT_EQ(left_out_batch(64, 16, 4, 1), std::nullopt);  // no last, short mini-batch
  EXPECT_EQ(left_out_batch(66, 16, 2, 1), std::nullopt);  // 2 samples for 2 micro-batches
  EXPECT_EQ(left_out_batch(66, 16, 2, 2),
            "the last mini-batch of each epoch (2 of the 66 samples) is left out: it needs 4 "
            "samples or more (--chunks 2 x --replicas 2); a --batch-size dividing the samples "
            "trains them all");
}

TEST(BatchBeyondData, OnlyAMiniBatchOfMoreThanTheSamplesIsSaidToBe) {
  EXPECT_EQ(batch_beyond_data(24, 24), std::nullopt);
  EXPECT_EQ(batch_beyond_data(24, 16), std::nullopt);
  EXPECT_EQ(batch_beyond_data(24, 32),
            "the mini-batch of 32 (--batch-size, or the plan's) is more than the data's 24 "
            "samples: each step trains on all 24");
}

TEST(NothingToTrain, OnlyAModelWithoutTrainableParametersIsSaidToHaveNone) {
  const models::Model mlp = models::build_model("mlp:layers=2,width=8", 0);
  EXPECT_EQ(nothing_to_train(mlp.layers), std::nullopt);
  for (const at::Tensor& p : mlp.layers.parameters()) p.requires_grad_(false);
  ASSERT_TRUE(nothing_to_train(mlp.layers).has_value());
  EXPECT_NE(nothing_to_train(mlp.layers)->find("no parameters to train"), std::string::npos);
}

TEST(CheckTargets, ClassIdsOfAnyIntegerTypeInRangeOrIgnoredPass) {
  EXPECT_EQ(
      error_of(with_targets(torch::tensor({0, 3, -100, 2})), LossKind::kCrossEntropy, kScores),
      "(no error)");
  EXPECT_EQ(error_of(with_targets(torch::tensor({0, 3, 1}, torch::kInt)), LossKind::kNll, kScores),
            "(no error)");
  EXPECT_EQ(error_of(with_targets(torch::tensor({true, false})), LossKind::kCrossEntropy, kScores),
            "(no error)");
}

TEST(CheckTargets, AClassIdOutOfRangeNamesTheFirstSampleHoldingOne) {
  EXPECT_EQ(error_of(with_targets(torch::tensor({0, 1, 4, -1})), LossKind::kCrossEntropy, kScores),
            "--data d.pt: sample 2 has class id 4, the model's output has 4 classes (ids 0 to 3, "
            "or -100 to ignore)");
  // Per token: sample 1's second id.
  EXPECT_EQ(error_of(with_targets(torch::tensor({{0, 1}, {2, -7}})), LossKind::kCrossEntropy,
                     torch::zeros({1, 2, 4})),
            "--data d.pt: sample 1 has class id -7, the model's output has 4 classes (ids 0 to 3, "
            "or -100 to ignore)");
}

TEST(CheckTargets, ShapesAndKindsTheLossCannotReadAreRefused) {
  EXPECT_EQ(
      error_of(with_targets(torch::zeros({3, 2}, torch::kLong)), LossKind::kCrossEntropy, kScores),
      "--data d.pt: cross_entropy reads one class id per output row of scores; a sample's "
      "targets have shape [2], the model's output [4] per sample");
  EXPECT_EQ(error_of(with_targets(torch::zeros({3})), LossKind::kNll, kScores),
            "--data d.pt: nll reads class ids (integers), the targets are float32 (regression "
            "targets? give --loss mse)");
  EXPECT_EQ(error_of(with_targets(torch::zeros({3}, torch::kLong)), LossKind::kMse, kScores),
            "--data d.pt: mse needs floating-point targets, these are int64 (class ids? give "
            "--loss cross_entropy)");
  EXPECT_EQ(error_of(with_targets(torch::zeros({3, 5})), LossKind::kMse, kScores),
            "--data d.pt: a sample's target has shape [5], the model's output [4]: mse compares "
            "them element by element");
  EXPECT_EQ(error_of(with_targets(torch::zeros({3, 4})), LossKind::kMse, kScores), "(no error)");
  // An output of classes, not scores.
  EXPECT_EQ(error_of(with_targets(torch::zeros({3}, torch::kLong)), LossKind::kCrossEntropy,
                     torch::zeros({1}, torch::kLong)),
            "the model's output is int64, not floating point: no loss can be trained on it "
            "(return the scores, not the classes)");
  // --loss none reads no targets.
  EXPECT_EQ(error_of(with_targets(torch::zeros({3, 9})), LossKind::kNone, kScores), "(no error)");
}

}  // namespace
}  // namespace pipebal::workflow
