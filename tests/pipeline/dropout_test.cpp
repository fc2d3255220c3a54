// Dropout in the engine: pipebal's Dropout keeps LibTorch's semantics but draws from the stage's
// own generator (no process-wide lock); either kind's masks are reproduced by recomputation.
#include "pipebal/pipeline/dropout.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "pipebal/pipeline/batch_norm.h"
#include "pipebal/pipeline/module_layer.h"
#include "pipebal/pipeline/pipeline.h"
#include "pipebal/pipeline/run_state.h"
#include "pipebal/pipeline/stage.h"

namespace pipebal::pipeline {
namespace {

namespace nn = torch::nn;

TEST(Dropout, DropsAtRateAndRescalesTheRest) {
  Dropout drop(0.25);
  const at::Tensor x = torch::ones({200000});
  const StageGeneratorScope seeded(7);
  const at::Tensor y = drop->forward(x);
  const double dropped = (y == 0).to(torch::kDouble).mean().item<double>();
  EXPECT_NEAR(dropped, 0.25, 0.01);
  EXPECT_TRUE(torch::allclose(y.masked_select(y != 0), torch::full({1}, 1 / 0.75)));
  drop->eval();
  EXPECT_TRUE(torch::equal(drop->forward(x), x));
  EXPECT_THROW(Dropout(1.0), std::invalid_argument);
}

// The mask is a function of the stage seed and each element's index, so the intra-op threads that
// fill it in parallel do not change it, and every floating dtype drops at the same rate.
TEST(Dropout, MaskIsTheSameOnAnyThreadCountAndDtype) {
  Dropout drop(0.3);
  const at::Tensor x = torch::ones({1 << 18});  // several parallel_for grains
  const int threads = at::get_num_threads();
  std::vector<at::Tensor> masks;
  for (int n : {1, 2, 3}) {
    at::set_num_threads(n);
    const StageGeneratorScope seeded(5);
    masks.push_back(drop->forward(x));
  }
  at::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(masks[0], masks[1]));
  EXPECT_TRUE(torch::equal(masks[0], masks[2]));
  for (auto dtype : {torch::kFloat64, torch::kBFloat16, torch::kFloat16}) {
    const StageGeneratorScope seeded(5);
    const at::Tensor y = drop->forward(x.to(dtype));
    EXPECT_EQ(y.scalar_type(), dtype);
    EXPECT_TRUE(torch::equal(y != 0, masks[0] != 0)) << "the same draws in every dtype";
    EXPECT_NEAR(y.max().item<double>(), 1 / 0.7, 0.01);
  }
  // Two dropouts in one micro-batch draw different masks (each takes its own key).
  const StageGeneratorScope seeded(5);
  const at::Tensor first = drop->forward(x), second = drop->forward(x);
  EXPECT_FALSE(torch::equal(first, second));
  EXPECT_NEAR((first == 0).logical_and(second == 0).to(torch::kDouble).mean().item<double>(), 0.09,
              0.005)
      << "the two masks are independent";
}

TEST(Dropout, StageSeedDeterminesTheMaskAndDefaultGeneratorIsUntouched) {
  Dropout drop(0.5);
  const at::Tensor x = torch::ones({64});
  torch::manual_seed(3);
  const at::Tensor before = torch::rand({4});
  torch::manual_seed(3);
  at::Tensor a, b, c;
  {
    const StageGeneratorScope seeded(11);
    a = drop->forward(x);
  }
  {
    const StageGeneratorScope seeded(11);
    b = drop->forward(x);
  }
  {
    const StageGeneratorScope seeded(12);
    c = drop->forward(x);
  }
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_FALSE(torch::equal(a, c));
  EXPECT_TRUE(torch::equal(torch::rand({4}), before)) << "the default generator was drawn from";
  EXPECT_EQ(stage_generator(), nullptr);
}

// A C++ module that draws random numbers its own way: noise from ATen's generator, in training.
struct NoiseImpl : nn::Module {
  at::Tensor forward(const at::Tensor& x) {
    return is_training() ? x + 0.5 * torch::randn_like(x) : x;
  }
};
TORCH_MODULE(Noise);

// What draws random numbers in a model: pipebal's Dropout (the stage's generator), LibTorch's
// (the shared one), LibTorch's RReLU (its slopes, from the shared one), or a module no layer
// type tells of (the shared one).
enum class Random { kOwnDropout, kDropout, kRReLU, kNoise };

// Dropout in both stages of a {2, 2} split: pipebal's own, or LibTorch's (shared generator).
LayerSeq dropout_model(Random kind) {
  torch::manual_seed(9);
  LayerSeq seq("dropout");
  auto dropout = [&](const std::string& name) {
    switch (kind) {
      case Random::kOwnDropout:
        return make_layer(name, "Dropout", Dropout(0.5));
      case Random::kDropout:
        return make_layer(name, "Dropout", nn::Dropout(0.5));
      case Random::kRReLU:
        break;
      case Random::kNoise:
        return make_layer(name, "Noise", Noise());
    }
    return make_layer(name, "RReLU", nn::RReLU());
  };
  seq.add(make_layer("fc0", "Linear", nn::Linear(8, 8)));
  seq.add(dropout("drop0"));
  seq.add(make_layer("fc1", "Linear", nn::Linear(8, 8)));
  seq.add(dropout("drop1"));
  return seq;
}

TEST(Dropout, CpuStageWithOwnDropoutTakesNoLock) {
  EXPECT_FALSE(Stage(0, 0, dropout_model(Random::kOwnDropout), c10::Device(c10::kCPU))
                   .takes_generator_lock());
  EXPECT_TRUE(
      Stage(0, 0, dropout_model(Random::kDropout), c10::Device(c10::kCPU)).takes_generator_lock());
  LayerSeq eval = dropout_model(Random::kDropout);
  eval.train(false);
  Stage stage(0, 0, eval, c10::Device(c10::kCPU));
  EXPECT_FALSE(stage.takes_generator_lock());
  eval.train(true);  // the stage shares the layers: it reads the mode again before each run
  stage.note_randomness();
  EXPECT_TRUE(stage.takes_generator_lock());
}

// A module no layer type tells of is found drawing from ATen's generator by the stage's first
// run in training mode, which takes the generator's lock from then on (seeded, a recompute draws
// what the forward drew); a stage that draws nothing leaves the generator as it was (a user's
// draws go on as if it had not run).
TEST(Dropout, AStageFindsAModuleDrawingItsOwnWay) {
  const Batch input(torch::randn({4, 8}));
  Stage noisy(0, 0, dropout_model(Random::kNoise), c10::Device(c10::kCPU));
  EXPECT_FALSE(noisy.takes_generator_lock()) << "nothing tells before it runs";
  Stage::ForwardMode checkpointed;
  checkpointed.checkpointed = true;
  noisy.forward(0, input, checkpointed);
  EXPECT_TRUE(noisy.takes_generator_lock());
  noisy.note_randomness();
  EXPECT_TRUE(noisy.takes_generator_lock()) << "what the run found holds in the same mode";

  LayerSeq plain("plain");
  plain.add(make_layer("fc", "Linear", nn::Linear(8, 8)));
  Stage quiet(0, 0, plain, c10::Device(c10::kCPU));
  torch::manual_seed(3);
  const at::Tensor expected = torch::rand({4});
  torch::manual_seed(3);
  quiet.forward(0, input, checkpointed);
  EXPECT_FALSE(quiet.takes_generator_lock());
  EXPECT_TRUE(torch::equal(torch::rand({4}), expected)) << "the generator was left moved";
}

// Doubles its input in place, as `x.mul_(2)` in a forward does.
struct DoubleInPlaceImpl : nn::Module {
  at::Tensor forward(at::Tensor x) { return x.mul_(2); }
};
TORCH_MODULE(DoubleInPlace);

// A stage whose first layer writes its input in place and whose noise is found by the probe:
// the probe's run and its seeded rerun leave the input as it came, so the recompute of every
// checkpointed micro-batch starts from the values its forward saw (gradients equal to the same
// step without checkpointing).
TEST(Dropout, AProbedStageWritingItsInputInPlaceRecomputesFromItsValues) {
  const Batch input(torch::randn({8, 8}));
  const at::Tensor target = torch::randn({8, 8});
  auto mse = [](const at::Tensor& out, const at::Tensor& t) { return torch::mse_loss(out, t); };
  std::vector<std::vector<at::Tensor>> grads;
  for (auto checkpoint : {CheckpointMode::kNever, CheckpointMode::kAlways}) {
    torch::manual_seed(9);
    LayerSeq model("in place and noise");
    model.add(make_layer("fc0", "Linear", nn::Linear(8, 8)));
    model.add(make_layer("double", "DoubleInPlace", DoubleInPlace()));
    model.add(make_layer("noise", "Noise", Noise()));
    model.add(make_layer("fc1", "Linear", nn::Linear(8, 8)));
    PipelineOptions options;
    options.chunks = 4;
    options.checkpoint = checkpoint;
    options.seed = 5;
    Pipeline pipeline(model, {1, 3}, {}, options);
    pipeline.step(input, target, mse);
    grads.emplace_back();
    for (const auto& p : model.parameters()) grads.back().push_back(p.grad().clone());
  }
  for (size_t i = 0; i < grads[0].size(); ++i)
    EXPECT_TRUE(torch::allclose(grads[0][i], grads[1][i], 1e-5, 1e-6))
        << "parameter " << i << ": " << (grads[0][i] - grads[1][i]).abs().max().item<double>();
}

// Checkpointed micro-batches are recomputed before their backward; the masks must be the ones
// the forward drew, so the gradients equal those of the same step without checkpointing — with
// pipebal's Dropout (the stage's generator), LibTorch's and RReLU (the shared one, under its
// lock), a module that draws its own way (found by its first run), and with a model put into
// training mode only after its pipeline was built.
TEST(Dropout, RecomputationReproducesTheForwardMasks) {
  const Batch input(torch::randn({8, 8}));
  const at::Tensor target = torch::randn({8, 8});
  auto mse = [](const at::Tensor& out, const at::Tensor& t) { return torch::mse_loss(out, t); };
  for (const auto& [kind, late_training] :
       {std::pair{Random::kOwnDropout, false}, std::pair{Random::kDropout, false},
        std::pair{Random::kRReLU, false}, std::pair{Random::kDropout, true},
        std::pair{Random::kNoise, false}, std::pair{Random::kNoise, true}}) {
    SCOPED_TRACE(testing::Message() << "random kind " << static_cast<int>(kind)
                                    << (late_training ? ", trained after building" : ""));
    std::vector<std::vector<at::Tensor>> grads;
    for (auto checkpoint : {CheckpointMode::kNever, CheckpointMode::kAlways}) {
      for (int repeat = 0; repeat < 2; ++repeat) {
        LayerSeq model = dropout_model(kind);
        if (late_training) model.train(false);
        PipelineOptions options;
        options.chunks = 4;
        options.checkpoint = checkpoint;
        options.seed = 5;
        Pipeline pipeline(model, {2, 2}, {}, options);
        if (late_training) model.train(true);
        pipeline.step(input, target, mse);
        grads.emplace_back();
        for (const auto& p : model.parameters()) grads.back().push_back(p.grad().clone());
      }
    }
    for (size_t run = 1; run < grads.size(); ++run) {
      for (size_t i = 0; i < grads[0].size(); ++i)
        EXPECT_TRUE(torch::equal(grads[0][i], grads[run][i]))
            << "run " << run << ", parameter " << i;
    }
    // Dropout did drop: the masked gradient differs from the model without dropout.
    LayerSeq plain = dropout_model(kind);
    plain.train(false);
    torch::mse_loss(plain.forward(input).value(), target).backward();
    EXPECT_FALSE(torch::allclose(plain.parameters()[0].grad(), grads[0][0]));
  }
}

// A stage found drawing by its probe runs its first forward again; a deferred batch norm before
// the noise counts that micro-batch once, so the running statistics equal the plain model's on
// the whole batch (the noise comes after the batch norm and does not change what it sees).
TEST(Dropout, AProbedStageCountsADeferredBatchNormsMicroBatchOnce) {
  const auto make = [] {
    torch::manual_seed(4);
    LayerSeq seq("bn and noise");
    seq.add(make_layer("fc0", "Linear", nn::Linear(5, 4)));
    seq.add(make_layer("bn", "BatchNorm", BatchNorm(4)));
    seq.add(make_layer("noise", "Noise", Noise()));
    seq.add(make_layer("fc1", "Linear", nn::Linear(4, 4)));
    seq.to(torch::kDouble);
    return seq;
  };
  const Batch input(torch::randn({12, 5}, torch::kDouble) * 3 + 1);
  const at::Tensor target = torch::randn({12, 4}, torch::kDouble);
  LayerSeq plain = make();
  plain.forward(input);
  for (auto checkpoint : {CheckpointMode::kNever, CheckpointMode::kAlways}) {
    SCOPED_TRACE(to_string(checkpoint));
    LayerSeq piped = make();
    PipelineOptions options;
    options.chunks = 3;
    options.checkpoint = checkpoint;
    options.deferred_batch_norm = true;
    Pipeline pipeline(piped, {3, 1}, {}, options);
    pipeline.step(input, target, [](const at::Tensor& out, const at::Tensor& t) {
      return torch::mse_loss(out, t);
    });
    const auto expected = plain.buffers(), actual = piped.buffers();
    ASSERT_EQ(expected.size(), actual.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_TRUE(torch::allclose(actual[i], expected[i], 1e-10, 1e-12))
          << "buffer " << i << ": " << actual[i] << " vs " << expected[i];
    }
  }
}

// A snapshot puts back what a deferred batch norm gathered since it was taken, with the buffers.
TEST(Dropout, ABufferSnapshotPutsBackADeferredBatchNormsSums) {
  LayerSeq seq("bn");
  BatchNorm bn(3);
  seq.add(make_layer("bn", "BatchNorm", bn));
  bn->set_deferred(true);
  bn->forward(torch::randn({4, 3}));
  const at::Tensor gathered = bn->pending_statistics();
  const BufferSnapshot snapshot(seq);
  bn->forward(torch::randn({4, 3}));
  EXPECT_FALSE(torch::equal(bn->pending_statistics(), gathered));
  snapshot.restore();
  EXPECT_TRUE(torch::equal(bn->pending_statistics(), gathered));
}

}  // namespace
}  // namespace pipebal::pipeline
