// The profiler's byte counts against analytic ones: what autograd saves for each layer, the
// peaks of its forward and backward. Float32 (4 bytes) unless said otherwise.
#include "pipebal/profiler/profiler.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "pipebal/models/zoo.h"
#include "pipebal/pipeline/batch_norm.h"
#include "pipebal/pipeline/module_layer.h"
#include "tests/profiler/profiler_test_support.h"

namespace pipebal::profiler {
namespace {

namespace nn = torch::nn;
using pipeline::Batch;
using pipeline::LayerSeq;
using testing::add_identity;
using testing::kFloat;
using testing::quick;

TEST(ProfilerBytes, LinearAndReluMatchWhatAutogradSaves) {
  const int64_t n = 8, in = 16, out = 32;
  LayerSeq seq("linear-relu");
  add_identity(seq);
  seq.add(pipeline::make_layer("fc", "Linear", nn::Linear(in, out)));
  seq.add(pipeline::make_layer("relu", "ReLU", nn::ReLU()));
  const Profile p = profile_model(seq, Batch(torch::randn({n, in})), quick());
  ASSERT_EQ(p.layers.size(), 3u);

  const LayerProfile& fc = p.layers[1];
  EXPECT_EQ(fc.param_bytes, (out * in + out) * kFloat);
  EXPECT_EQ(fc.buffer_bytes, 0);
  // addmm(bias, x, W^T) saves x (the input, already alive) and W (a parameter); the only new
  // allocation left alive is the output y [n, out].
  EXPECT_EQ(fc.activation_bytes, n * out * kFloat);
  EXPECT_EQ(fc.output_bytes, n * out * kFloat);
  // Its backward runs as inside a stage: the output goes once no node needs it (addmm saved x
  // and W, not y), its gradient (the seed) takes its place, and the input's and the parameters'
  // gradients come on top; the layer's peak holds the activations besides.
  EXPECT_EQ(fc.backward_peak_bytes, (n * in + out * in + out) * kFloat);
  EXPECT_GE(fc.peak_bytes, fc.activation_bytes + fc.backward_peak_bytes);
  // Its W makes the weight's and the bias's new gradients, then adds them to the held ones.
  EXPECT_EQ(fc.weight_peak_bytes, fc.param_bytes);
  // From B to W it holds its output and the gradient that arrived at it, which B keeps for W
  // (addmm, the output's node, has the weight's branch), as a stage does the gradient it received.
  EXPECT_EQ(fc.weight_held_bytes, 2 * n * out * kFloat);
  // Nothing of its graph keeps the output: a stage ending here, which sent it, holds none of it.
  EXPECT_EQ(fc.released_output_bytes, n * out * kFloat);

  const LayerProfile& relu = p.layers[2];
  EXPECT_EQ(relu.param_bytes, 0);
  // relu saves its result, which is the output: [n, out].
  EXPECT_EQ(relu.activation_bytes, n * out * kFloat);
  EXPECT_EQ(relu.output_bytes, n * out * kFloat);
  // No parameters: B keeps no gradient, and frees the result it saved, the output (no W runs
  // through it): the output is all it holds, and only while the next layer's input.
  EXPECT_EQ(relu.weight_held_bytes, n * out * kFloat);
  EXPECT_EQ(relu.released_output_bytes, n * out * kFloat);

  // The identity passes its input through: nothing new, nothing to differentiate.
  EXPECT_EQ(p.layers[0].activation_bytes, 0);
  EXPECT_EQ(p.layers[0].output_bytes, n * in * kFloat);
  // Each layer's input is the micro-batch of the model's input, then the output before it.
  EXPECT_EQ(p.layers[0].input_bytes, n * in * kFloat);
  EXPECT_EQ(fc.input_bytes, p.layers[0].output_bytes);
  EXPECT_EQ(relu.input_bytes, fc.output_bytes);
}

TEST(ProfilerBytes, Conv2dMatchesWhatAutogradSaves) {
  const int64_t n = 2, c_in = 3, c_out = 8, hw = 16, k = 3;
  LayerSeq seq("conv");
  add_identity(seq);
  seq.add(pipeline::make_layer("conv", "Conv2d",
                               nn::Conv2d(nn::Conv2dOptions(c_in, c_out, k).padding(1))));
  const Profile p = profile_model(seq, Batch(torch::randn({n, c_in, hw, hw})), quick());
  const LayerProfile& conv = p.layers[1];
  EXPECT_EQ(conv.param_bytes, (c_out * c_in * k * k + c_out) * kFloat);
  // Convolution saves its input and weight (both alive already); padding 1 keeps H and W, so
  // the new output [n, c_out, hw, hw] is all that stays.
  EXPECT_EQ(conv.activation_bytes, n * c_out * hw * hw * kFloat);
  EXPECT_EQ(conv.output_bytes, n * c_out * hw * hw * kFloat);
}

// A forward that allocates a large temporary and frees it before returning: the layer's peak
// counts it, the backward's own peak does not (it starts after it was freed).
TEST(ProfilerBytes, TheBackwardsPeakLeavesOutTheForwardsTransients) {
  const int64_t n = 8, d = 16, scratch = int64_t{1} << 20;  // 4 MiB of float32
  LayerSeq seq("transient");
  add_identity(seq);
  seq.add(pipeline::make_layer("scratch", "Functional", nn::Functional([](const at::Tensor& x) {
                                 const at::Tensor temporary = torch::ones({scratch});
                                 return x * 2 + temporary.sum() * 0;
                               })));
  const Profile p = profile_model(seq, Batch(torch::randn({n, d})), quick());
  const LayerProfile& layer = p.layers[1];
  EXPECT_GE(layer.peak_bytes, scratch * kFloat);
  // The seed in place of the output (which no node saved) and the input's gradient, [n, d]
  // each, and little else.
  EXPECT_GE(layer.backward_peak_bytes, n * d * kFloat);
  EXPECT_LE(layer.backward_peak_bytes, 8 * n * d * kFloat);
}

TEST(ProfilerBytes, BatchNormSavesOutputAndPerChannelStatistics) {
  const int64_t n = 4, c = 8, hw = 5;
  LayerSeq seq("bn");
  add_identity(seq);
  seq.add(pipeline::make_layer("bn", "BatchNorm", pipeline::BatchNorm(c)));
  const Profile p = profile_model(seq, Batch(torch::randn({n, c, hw, hw})), quick());
  const LayerProfile& bn = p.layers[1];
  EXPECT_EQ(bn.param_bytes, 2 * c * kFloat);       // weight, bias
  EXPECT_EQ(bn.buffer_bytes, 2 * c * kFloat + 8);  // running mean, var; int64 counter
  // native_batch_norm saves input, weight and running statistics (alive already) plus the
  // batch mean and inverse std it computes, [c] each; and the output [n, c, hw, hw] stays.
  EXPECT_EQ(bn.activation_bytes, n * c * hw * hw * kFloat + 2 * c * kFloat);
  EXPECT_EQ(bn.output_bytes, n * c * hw * hw * kFloat);
}

TEST(ProfilerBytes, GptBlockMatchesWhatAutogradSaves) {
  const int64_t n = 2, t = 8, d = 16, h = 2, vocab = 50;
  models::Model model =
      models::build_model("gpt:layers=1,dim=16,heads=2,seq=8,vocab=50", /*seed=*/1);
  const Batch tokens(torch::randint(vocab, {n, t}, torch::kLong));
  const Profile p = profile_model(model.layers, tokens, quick());
  const LayerProfile& block = p.layers.at(1);
  ASSERT_EQ(block.type, "DecoderBlock");
  // Two LayerNorms (weight, bias: d each), qkv (3d x d + 3d), proj (d x d + d), mlp
  // (4d x d + 4d, d x 4d + d).
  EXPECT_EQ(block.param_bytes,
            (4 * d + 3 * d * d + 3 * d + d * d + d + 4 * d * d + 4 * d + 4 * d * d + d) * kFloat);
  // Alive after the block's forward, new (x, weights and biases are alive already):
  //   norm1: output y1 (saved by qkv's addmm) [n,t,d]; mean and rstd [n,t] each
  //   qkv output: freed (only views of it reach matmul, which copies them)
  //   q, k, v: matmul reshapes each permuted [n,h,t,d/h] slice with a copy, saved by bmm: 3 ntd
  //   scores, scaled scores, masked scores: freed (bmm, div and masked_fill save nothing of
  //   them); softmax saves its result [n,h,t,t], which the second bmm also saves
  //   causal mask: bool [t,t], saved by masked_fill: t*t bytes
  //   attention output: bmm result freed; the transpose+reshape copy [n,t,d] is saved by proj
  //   proj output: freed (the residual add saves nothing); h = x + attn [n,t,d], saved by norm2
  //   norm2: y2 [n,t,d] saved by fc1; mean and rstd [n,t] each
  //   fc1 output [n,t,4d] saved by GELU; GELU output [n,t,4d] saved by fc2; fc2 output freed
  //   block output h + mlp [n,t,d]
  // = 16 ntd + 4 nt + n h t^2 floats, plus t^2 bool bytes. Dropout 0 is the identity.
  const int64_t floats = 16 * n * t * d + 4 * n * t + n * h * t * t;
  EXPECT_EQ(block.activation_bytes, floats * kFloat + t * t);
  EXPECT_EQ(block.output_bytes, n * t * d * kFloat);
  EXPECT_EQ(p.layers.at(0).input_bytes, n * t * 8) << "the token ids, int64";
}

// The last layer's backward peak includes the loss's, as the last stage's B does. Cross-entropy
// keeps its log-softmax L [n, c] until its backward, which makes the gradient at L and from it
// the gradient at the logits: three [n, c] at once, in place of the logits (which go once L is
// made, as nothing saved them); from a seed of ones, one [n, c] in their place.
TEST(ProfilerBytes, TheLastLayersBackwardPeakIncludesTheLoss) {
  const int64_t n = 64, in = 4, classes = 1024;
  LayerSeq seq("head");
  add_identity(seq);
  seq.add(pipeline::make_layer("fc", "Linear", nn::Linear(in, classes)));
  const Batch sample(torch::randn({n, in}));
  const Profile seeded = profile_model(seq, sample, quick());
  ProfileOptions with_loss = quick();
  const at::Tensor target = torch::randint(classes, {n}, torch::kLong);
  with_loss.loss = [&](const at::Tensor& output) {
    return torch::nll_loss(torch::log_softmax(output, 1), target);
  };
  const Profile p = profile_model(seq, sample, with_loss);
  EXPECT_GE(p.layers[1].backward_peak_bytes, 2 * n * classes * kFloat)
      << "seeded: " << seeded.layers[1].backward_peak_bytes;
  EXPECT_GT(p.layers[1].backward_peak_bytes, seeded.layers[1].backward_peak_bytes);
  // The loss is computed in the backward: the forward's activations are the same.
  EXPECT_EQ(p.layers[1].activation_bytes, seeded.layers[1].activation_bytes);
}

}  // namespace
}  // namespace pipebal::profiler
