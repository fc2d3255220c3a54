// U-Net zoo model: shapes, gradients, skip routing, clone, input checks, and a reference
// forward written with ATen functions on the layers' own parameters.
#include "pipebal/models/unet.h"

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "pipebal/pipeline/layer_seq.h"
#include "tests/models/model_test_support.h"

namespace pipebal::models {
namespace {

UNetOptions small_options() {
  UNetOptions options;
  options.B = 2;
  options.C = 4;
  return options;
}

at::Tensor small_input() {
  return torch::randn({2, 3, 16, 16});
}

// Hands out a layer's parameters in registration order.
class Params {
 public:
  explicit Params(const pipeline::Layer& layer) : params_(layer.parameters()) {}
  const at::Tensor& next() { return params_.at(index_++); }
  bool done() const { return index_ == params_.size(); }

 private:
  std::vector<at::Tensor> params_;
  size_t index_ = 0;
};

// (conv 3x3 without bias, batch norm with batch statistics, ReLU) twice.
at::Tensor ref_conv_block(const at::Tensor& input, Params& p) {
  at::Tensor x = input;
  for (int i = 0; i < 2; ++i) {
    const at::Tensor& w = p.next();
    const at::Tensor& gamma = p.next();
    const at::Tensor& beta = p.next();
    x = at::conv2d(x, w, {}, 1, 1);
    x = at::batch_norm(x, gamma, beta, {}, {}, /*training=*/true, 0.1, 1e-5, false);
    x = at::relu(x);
  }
  return x;
}

// The U-Net of unet.h, spelled out with plain ATen calls and explicit skip variables.
at::Tensor reference_forward(const pipeline::LayerSeq& seq, int64_t levels, const at::Tensor& in) {
  size_t layer = 0;
  auto params = [&]() { return Params(seq[layer++]); };
  Params stem = params();
  at::Tensor x = ref_conv_block(in, stem);
  std::vector<at::Tensor> skips;
  for (int64_t i = 0; i < levels; ++i) {
    Params enc = params();
    x = ref_conv_block(x, enc);
    EXPECT_TRUE(enc.done());
    skips.push_back(x);
    ++layer;  // down{i}: no parameters
    x = at::max_pool2d(x, {2, 2}, {2, 2});
  }
  Params bottom = params();
  x = ref_conv_block(x, bottom);
  for (int64_t i = levels - 1; i >= 0; --i) {
    Params dec = params();
    const at::Tensor up = x.repeat_interleave(2, 2).repeat_interleave(2, 3);
    x = ref_conv_block(at::cat({up, skips[i]}, 1), dec);
    EXPECT_TRUE(dec.done());
  }
  Params head = params();
  const at::Tensor& w = head.next();
  const at::Tensor& b = head.next();
  EXPECT_EQ(layer, seq.size());
  return at::conv2d(x, w, b);
}

TEST(UNet, LayersAreNamedAndTyped) {
  const pipeline::LayerSeq seq = make_unet(small_options());
  const std::vector<std::string> names = {"stem",   "enc0", "down0", "enc1", "down1",
                                          "bottom", "dec1", "dec0",  "head"};
  const std::vector<std::string> types = {"ConvBlock",    "EncoderBlock", "Downsample",
                                          "EncoderBlock", "Downsample",   "ConvBlock",
                                          "DecoderBlock", "DecoderBlock", "Conv1x1"};
  ASSERT_EQ(seq.size(), names.size());
  for (size_t i = 0; i < seq.size(); ++i) {
    EXPECT_EQ(seq[i].name(), names[i]);
    EXPECT_EQ(seq[i].type(), types[i]);
  }
}

TEST(UNet, ForwardBackwardGivesShapeAndFiniteGradients) {
  torch::manual_seed(0);
  const pipeline::LayerSeq seq = make_unet(small_options());
  const at::Tensor input = small_input();
  const pipeline::Batch out = seq.forward(pipeline::Batch(input));
  ASSERT_EQ(out.tensors.size(), 1u);
  EXPECT_EQ(out.value().sizes(), (std::vector<int64_t>{2, 1, 16, 16}));
  EXPECT_TRUE(out.skips.empty());

  out.value().pow(2).mean().backward();
  int nonzero = 0;
  for (const auto& p : seq.parameters()) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_TRUE(torch::isfinite(p.grad()).all().item<bool>());
    if (p.grad().abs().sum().item<double>() > 0) ++nonzero;
  }
  EXPECT_GT(nonzero, static_cast<int>(seq.parameters().size()) / 2);
}

TEST(UNet, ChannelsDoublePerLevel) {
  torch::manual_seed(0);
  const pipeline::LayerSeq seq = make_unet(small_options());
  pipeline::Batch batch(small_input());
  const std::vector<std::vector<int64_t>> shapes = {{2, 4, 16, 16}, {2, 8, 16, 16}, {2, 8, 8, 8},
                                                    {2, 16, 8, 8},  {2, 16, 4, 4},  {2, 16, 4, 4},
                                                    {2, 8, 8, 8},   {2, 4, 16, 16}, {2, 1, 16, 16}};
  for (size_t i = 0; i < seq.size(); ++i) {
    batch = seq[i].forward(std::move(batch));
    EXPECT_EQ(batch.value().sizes(), shapes[i]) << "after " << seq[i].name();
  }
}

TEST(UNet, SkipsAreDeclaredStashedAndPopped) {
  const pipeline::LayerSeq seq = make_unet(small_options());
  EXPECT_NO_THROW(seq.check_skips());
  for (size_t i = 0; i < seq.size(); ++i) {
    const pipeline::Layer& layer = seq[i];
    const std::string& name = layer.name();
    if (name.rfind("enc", 0) == 0) {
      EXPECT_EQ(layer.stashes(), std::vector<std::string>{"skip" + name.substr(3)});
      EXPECT_TRUE(layer.pops().empty());
    } else if (name.rfind("dec", 0) == 0) {
      EXPECT_EQ(layer.pops(), std::vector<std::string>{"skip" + name.substr(3)});
      EXPECT_TRUE(layer.stashes().empty());
    } else {
      EXPECT_TRUE(layer.stashes().empty()) << name;
      EXPECT_TRUE(layer.pops().empty()) << name;
    }
  }

  // At run time the batch carries exactly the declared, live skip tensors.
  pipeline::Batch batch(small_input());
  std::set<std::string> live;
  for (size_t i = 0; i < seq.size(); ++i) {
    batch = seq[i].forward(std::move(batch));
    for (const auto& s : seq[i].pops()) live.erase(s);
    for (const auto& s : seq[i].stashes()) live.insert(s);
    std::set<std::string> carried;
    for (const auto& [name, tensor] : batch.skips) carried.insert(name);
    EXPECT_EQ(carried, live) << "after " << seq[i].name();
  }
  EXPECT_TRUE(batch.skips.empty());

  // The stashed tensor is the encoder's output, before downsampling.
  const pipeline::Batch after_enc0 = seq.slice(0, 2).forward(pipeline::Batch(small_input()));
  EXPECT_TRUE(after_enc0.skips.at("skip0").is_same(after_enc0.value()));
  EXPECT_EQ(after_enc0.skips.at("skip0").sizes(), (std::vector<int64_t>{2, 8, 16, 16}));
}

TEST(UNet, MatchesReferenceForward) {
  torch::manual_seed(1);
  const pipeline::LayerSeq seq = make_unet(small_options());
  const at::Tensor input = small_input();
  const at::Tensor expected = reference_forward(seq, 2, input);
  const at::Tensor actual = seq.forward(pipeline::Batch(input)).value();
  EXPECT_TRUE(torch::allclose(actual, expected, 1e-5, 1e-5))
      << (actual - expected).abs().max().item<double>();
}

TEST(UNet, StagesCarrySkipTensorsAcrossCuts) {
  torch::manual_seed(2);
  const pipeline::LayerSeq seq = make_unet(small_options());
  const at::Tensor input = small_input();
  seq.train(false);
  const at::Tensor whole = seq.forward(pipeline::Batch(input)).value();
  for (size_t cut = 1; cut < seq.size(); ++cut) {
    pipeline::Batch middle = seq.slice(0, cut).forward(pipeline::Batch(input));
    const at::Tensor parts = seq.slice(cut, seq.size() - cut).forward(std::move(middle)).value();
    EXPECT_TRUE(torch::equal(parts, whole)) << "cut before layer " << cut;
  }
}

TEST(UNet, CloneIsEqualAndDeep) {
  torch::manual_seed(3);
  const pipeline::LayerSeq seq = make_unet(small_options());
  const at::Tensor input = small_input();
  seq.forward(pipeline::Batch(input));  // moves the batch norm running statistics
  const pipeline::LayerSeq copy = seq.clone();
  ASSERT_EQ(copy.size(), seq.size());
  EXPECT_NO_THROW(copy.check_skips());
  for (size_t i = 0; i < seq.size(); ++i) {
    EXPECT_EQ(copy[i].name(), seq[i].name());
    EXPECT_EQ(copy[i].stashes(), seq[i].stashes());
    EXPECT_EQ(copy[i].pops(), seq[i].pops());
  }
  expect_equal_deep_clone(seq, copy, input);
}

TEST(UNet, RejectsInputNotDivisibleBy2PowB) {
  const pipeline::LayerSeq seq = make_unet(small_options());
  expect_invalid_argument(
      [&] {
        seq.forward(pipeline::Batch(torch::randn({2, 3, 15, 16})));
      },
      {"'stem'", "[2, 3, 15, 16]", "divisible by 2^B = 4"});
  expect_invalid_argument(
      [&] {
        seq.forward(pipeline::Batch(torch::randn({2, 3, 16, 18})));
      },
      {"'stem'", "[2, 3, 16, 18]"});
  expect_invalid_argument(
      [&] {
        seq.forward(pipeline::Batch(torch::randn({2, 1, 16, 16})));
      },
      {"'stem'", "[2, 1, 16, 16]", "[N, 3, H, W]"});
}

TEST(UNet, DecoderWithoutItsSkipTensorNamesTheLayer) {
  const pipeline::LayerSeq seq = make_unet(small_options());
  // Layers from `bottom` on, fed a batch that never went through the encoders.
  const pipeline::LayerSeq tail = seq.slice(5, seq.size() - 5);
  expect_invalid_argument(
      [&] {
        tail.forward(pipeline::Batch(torch::randn({2, 16, 4, 4})));
      },
      {"'dec1'", "'skip1'"});
}

TEST(UNet, RejectsBadOptions) {
  UNetOptions options = small_options();
  options.B = 0;
  expect_invalid_argument([&] { make_unet(options); }, {"B must be"});
  options = small_options();
  options.C = 0;
  expect_invalid_argument([&] { make_unet(options); }, {"C"});
}

}  // namespace
}  // namespace pipebal::models
