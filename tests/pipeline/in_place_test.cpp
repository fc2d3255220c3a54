// Layers that write their stage's input in place (pipeline/in_place.h), at every stage boundary
// and first in the model: gradients equal the plain model's in every checkpoint mode, so a
// recomputation starts from the values its forward saw.
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "pipebal/pipeline/module_layer.h"
#include "pipebal/pipeline/pipeline.h"
#include "tests/support/skip_model.h"

namespace pipebal::pipeline {
namespace {

namespace nn = torch::nn;
using testing::kWidth;
using testing::mse;
using testing::plain_step;
using testing::Reference;

// Linear, ReLU(inplace), Linear, ReLU(inplace), Linear: every cut puts a layer that writes its
// input in place first in a stage, where its input is a leaf.
LayerSeq make_in_place_model(uint64_t seed) {
  torch::manual_seed(seed);
  LayerSeq seq("in-place");
  seq.add(make_layer("fc0", "Linear", nn::Linear(kWidth, kWidth)));
  seq.add(make_layer("relu0", "ReLU", nn::ReLU(nn::ReLUOptions().inplace(true))));
  seq.add(make_layer("fc1", "Linear", nn::Linear(kWidth, kWidth)));
  seq.add(make_layer("relu1", "ReLU", nn::ReLU(nn::ReLUOptions().inplace(true))));
  seq.add(make_layer("head", "Linear", nn::Linear(kWidth, 3)));
  seq.to(torch::kDouble);
  return seq;
}

TEST(Pipeline, InPlaceLayersAtStageBoundariesTrainLikeThePlainModel) {
  torch::manual_seed(6);
  const Batch input(torch::randn({6, kWidth}, torch::kDouble));
  const at::Tensor target = torch::randn({6, 3}, torch::kDouble);
  LayerSeq plain = make_in_place_model(3);
  const Reference ref = plain_step(plain, input, target);
  for (const std::vector<int>& balance :
       {std::vector<int>{1, 2, 2}, std::vector<int>{3, 2}, std::vector<int>{1, 1, 1, 1, 1}}) {
    for (auto checkpoint : {CheckpointMode::kAlways, CheckpointMode::kNever}) {
      LayerSeq piped = make_in_place_model(3);
      PipelineOptions options;
      options.chunks = 3;
      options.checkpoint = checkpoint;
      Pipeline pipeline(piped, balance, {}, options);
      for (int step = 0; step < 2; ++step) {  // the second step takes the copy up front
        for (auto& p : piped.parameters()) p.mutable_grad() = at::Tensor();
        const StepResult result = pipeline.step(input, target, mse);
        EXPECT_NEAR(result.loss, ref.loss, 1e-10 * std::abs(ref.loss));
        const auto params = piped.parameters();
        for (size_t i = 0; i < params.size(); ++i) {
          EXPECT_TRUE(torch::allclose(params[i].grad(), ref.grads[i], 1e-10, 1e-12))
              << "parameter " << i << ", step " << step;
        }
      }
    }
  }
}

// LeakyReLU(inplace), Linear, LeakyReLU(inplace), Linear, LeakyReLU(inplace), Linear: applied
// twice a LeakyReLU gives other values (a ReLU does not), so a stage that ran one again on an
// input it had already written would show in the gradients. The first writes the model's input,
// which needs no gradient.
LayerSeq make_leaky_in_place_model(uint64_t seed) {
  torch::manual_seed(seed);
  const auto leaky = [] {
    return nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.1).inplace(true));
  };
  LayerSeq seq("leaky-in-place");
  seq.add(make_layer("leaky0", "LeakyReLU", leaky()));
  seq.add(make_layer("fc0", "Linear", nn::Linear(kWidth, kWidth)));
  seq.add(make_layer("leaky1", "LeakyReLU", leaky()));
  seq.add(make_layer("fc1", "Linear", nn::Linear(kWidth, kWidth)));
  seq.add(make_layer("leaky2", "LeakyReLU", leaky()));
  seq.add(make_layer("head", "Linear", nn::Linear(kWidth, 3)));
  seq.to(torch::kDouble);
  return seq;
}

// A checkpointed forward runs without grad, where nothing refuses a write to the stage's input:
// the recompute must still start from the values the forward saw.
TEST(Pipeline, LayersWritingTheirInputTrainLikeThePlainModelInEveryCheckpointMode) {
  torch::manual_seed(7);
  const at::Tensor input = torch::randn({6, kWidth}, torch::kDouble);
  const at::Tensor target = torch::randn({6, 3}, torch::kDouble);
  LayerSeq plain = make_leaky_in_place_model(4);
  const Reference ref = plain_step(plain, Batch(input.clone()), target);
  for (const std::vector<int>& balance :
       {std::vector<int>{2, 2, 2}, std::vector<int>{4, 2}, std::vector<int>{1, 1, 1, 1, 1, 1}}) {
    for (auto schedule : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB}) {
      for (auto checkpoint :
           {CheckpointMode::kAlways, CheckpointMode::kExceptLast, CheckpointMode::kNever}) {
        LayerSeq piped = make_leaky_in_place_model(4);
        PipelineOptions options;
        options.chunks = 3;
        options.schedule = schedule;
        options.checkpoint = checkpoint;
        Pipeline pipeline(piped, balance, {}, options);
        for (int step = 0; step < 2; ++step) {  // the second step copies up front
          for (auto& p : piped.parameters()) p.mutable_grad() = at::Tensor();
          const StepResult result = pipeline.step(Batch(input.clone()), target, mse);
          EXPECT_NEAR(result.loss, ref.loss, 1e-10 * std::abs(ref.loss));
          const auto params = piped.parameters();
          for (size_t i = 0; i < params.size(); ++i) {
            EXPECT_TRUE(torch::allclose(params[i].grad(), ref.grads[i], 1e-10, 1e-12))
                << "parameter " << i << ", step " << step << ", checkpoint "
                << to_string(checkpoint) << ", " << to_string(schedule) << ", balance "
                << balance.size() << " stages";
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace pipebal::pipeline
