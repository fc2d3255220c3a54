// A TorchScript model's dropout (nn.Dropout, nn.Dropout2d, F.dropout) draws from the stage's own
// generator: no stage takes the process-wide lock for it, recomputation replays its masks, it
// drops what LibTorch's would, and the model saved back still loads without pipebal.
#include "pipebal/pipeline/script_dropout.h"

#include <filesystem>

#include <fstream>

#include <gtest/gtest.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "pipebal/pipeline/dropout.h"
#include "pipebal/pipeline/pipeline.h"
#include "pipebal/pipeline/script_layer.h"
#include "pipebal/pipeline/stage.h"
#include "tests/support/scratch_dir.h"

namespace pipebal::pipeline {
namespace {

const std::string kKinds = std::string(PIPEBAL_FIXTURES_DIR) + "/dropout_kinds_scripted.pt";

// Conv2d, Dropout2d(0.5), Flatten, Linear, Dropout(0.5), F.dropout(0.5) inside a module, Linear.
ScriptModel load_kinds() {
  return load_script_model(kKinds);
}

// True when `op` runs in `module`'s forward, the functions it calls included.
bool forward_calls(torch::jit::Module& module, const std::string& op) {
  const std::shared_ptr<torch::jit::Graph> graph = module.get_method("forward").graph()->copy();
  torch::jit::Inline(*graph);
  for (const torch::jit::Node* node : graph->nodes()) {
    if (node->kind().toQualString() == op) return true;
  }
  return false;
}

TEST(ScriptDropout, EveryDropoutDrawsFromTheStageGenerator) {
  ScriptModel model = load_kinds();
  for (size_t i : {1u, 4u, 5u}) {
    EXPECT_TRUE(model.layers[i].is_stochastic()) << model.layers[i].name();
    EXPECT_FALSE(model.layers[i].draws_from_shared_generator()) << model.layers[i].name();
  }
  EXPECT_FALSE(model.layers[0].is_stochastic());
  EXPECT_FALSE(Stage(0, 0, model.layers, c10::Device(c10::kCPU)).takes_generator_lock());
  // A random ATen operator that is not rewritten keeps the lock.
  torch::jit::Module noisy("Noisy");
  noisy.define("def forward(self, x):\n  return x + torch.rand_like(x)\n");
  EXPECT_TRUE(calls_aten_random_ops(noisy));
  EXPECT_FALSE(calls_aten_random_ops(
      torch::jit::load(std::string(PIPEBAL_FIXTURES_DIR) + "/sequential_mlp_scripted.pt")));
}

TEST(ScriptDropout, MasksFollowTheStageSeedAndDropLikeLibTorch) {
  ScriptModel model = load_kinds();
  const at::Tensor x = torch::ones({64, 3, 8, 8});
  const auto first_two = [&](uint64_t seed) {
    const StageGeneratorScope seeded(seed);
    return model.layers[1].forward(model.layers[0].forward(Batch(x))).value();
  };
  torch::manual_seed(3);
  const at::Tensor before = torch::rand({4});
  torch::manual_seed(3);
  const at::Tensor a = first_two(11), b = first_two(11), c = first_two(12);
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_FALSE(torch::equal(a, c));
  EXPECT_TRUE(torch::equal(torch::rand({4}), before)) << "ATen's generator was drawn from";
  // Dropout2d drops whole channels: each (sample, channel) plane is all zero or all kept.
  const at::Tensor plane_zero = (a == 0).flatten(2).all(2);
  const at::Tensor plane_kept = (a != 0).flatten(2).all(2);
  EXPECT_TRUE((plane_zero | plane_kept).all().item<bool>());
  EXPECT_NEAR(plane_zero.to(torch::kDouble).mean().item<double>(), 0.5, 0.1);
}

// Checkpointed micro-batches are recomputed before their backward: the masks must be the
// forward's, so the gradients equal those of the same step without checkpointing.
TEST(ScriptDropout, RecomputationReplaysTheMasks) {
  torch::manual_seed(0);
  const Batch input(torch::randn({8, 3, 8, 8}));
  const at::Tensor target = torch::randn({8, 3});
  auto mse = [](const at::Tensor& out, const at::Tensor& t) { return torch::mse_loss(out, t); };
  std::vector<std::vector<at::Tensor>> grads;
  for (auto checkpoint : {CheckpointMode::kNever, CheckpointMode::kAlways}) {
    ScriptModel model = load_kinds();
    PipelineOptions options;
    options.chunks = 4;
    options.checkpoint = checkpoint;
    options.seed = 5;
    Pipeline pipeline(model.layers, {3, 4}, {}, options);
    pipeline.step(input, target, mse);
    grads.emplace_back();
    for (const auto& p : model.layers.parameters()) grads.back().push_back(p.grad().clone());
  }
  for (size_t i = 0; i < grads[0].size(); ++i) {
    EXPECT_TRUE(torch::equal(grads[0][i], grads[1][i])) << "parameter " << i;
  }
  // Dropout did drop: the gradient differs from the model's without dropout.
  ScriptModel plain = load_kinds();
  plain.layers.train(false);
  torch::mse_loss(plain.layers.forward(input).value(), target).backward();
  EXPECT_FALSE(torch::allclose(plain.layers.parameters()[0].grad(), grads[0][0]));
}

TEST(ScriptDropout, TheSavedModelCallsLibTorchsDropoutWithTheTrainedWeights) {
  ScriptModel model = load_kinds();
  {
    torch::NoGradGuard no_grad;
    model.layers.parameters()[0].add_(1.0);  // "trained"
  }
  const std::string path = pipebal::testing::scratch_path("saved.pt");
  {
    std::ofstream file(path, std::ios::binary);
    model.save(file);
  }
  torch::jit::Module saved = torch::jit::load(path);
  EXPECT_TRUE(forward_calls(saved, "aten::dropout"));
  EXPECT_TRUE(forward_calls(saved, "aten::feature_dropout"));
  EXPECT_FALSE(forward_calls(saved, "pipebal::dropout"));
  EXPECT_FALSE(forward_calls(saved, "pipebal::feature_dropout"));
  EXPECT_TRUE(torch::equal((*saved.parameters().begin()), model.layers.parameters()[0]));
  // And loading it again gives a model whose dropout is pipebal's once more.
  EXPECT_FALSE(load_script_model(path).layers[4].draws_from_shared_generator());
}

}  // namespace
}  // namespace pipebal::pipeline
