// See unet.h.
#include "pipebal/models/unet.h"

#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <torch/torch.h>

#include "pipebal/pipeline/batch_norm.h"
#include "pipebal/pipeline/module_layer.h"

namespace pipebal::models {
namespace {

namespace nn = torch::nn;

std::string shape_of(const at::Tensor& x) {
  return c10::str(x.sizes());
}

std::string skip_name(int64_t level) {
  return "skip" + std::to_string(level);
}

// (3x3 conv, batch norm, ReLU) twice. The convs have no bias: batch norm's shift replaces it.
struct ConvBlockImpl : nn::Cloneable<ConvBlockImpl> {
  ConvBlockImpl(int64_t in, int64_t out) : in_(in), out_(out) { reset(); }

  void reset() override {
    body_ = register_module(
        "body", nn::Sequential(nn::Conv2d(nn::Conv2dOptions(in_, out_, 3).padding(1).bias(false)),
                               pipeline::BatchNorm(out_), nn::ReLU(),
                               nn::Conv2d(nn::Conv2dOptions(out_, out_, 3).padding(1).bias(false)),
                               pipeline::BatchNorm(out_), nn::ReLU()));
  }

  at::Tensor forward(const at::Tensor& x) { return body_->forward(x); }

  int64_t in_, out_;
  nn::Sequential body_{nullptr};
};
TORCH_MODULE(ConvBlock);

// The first conv block; it also checks the input, since a wrong H or W would otherwise
// surface only as a shape mismatch deep in the decoder.
struct StemImpl : nn::Cloneable<StemImpl> {
  StemImpl(std::string layer, int64_t in, int64_t out, int64_t levels)
      : layer_(std::move(layer)), in_(in), out_(out), levels_(levels) {
    reset();
  }

  void reset() override { block_ = register_module("block", ConvBlock(in_, out_)); }

  at::Tensor forward(const at::Tensor& x) {
    if (x.dim() != 4 || x.size(1) != in_) {
      throw std::invalid_argument(fmt::format(
          "unet layer '{}': input shape {}, expected [N, {}, H, W]", layer_, shape_of(x), in_));
    }
    const int64_t divisor = int64_t{1} << levels_;
    if (x.size(2) % divisor != 0 || x.size(3) % divisor != 0) {
      throw std::invalid_argument(
          fmt::format("unet layer '{}': input shape {}: H and W must be divisible by 2^B = {} "
                      "(B = {} levels)",
                      layer_, shape_of(x), divisor, levels_));
    }
    return block_->forward(x);
  }

  std::string layer_;
  int64_t in_, out_, levels_;
  ConvBlock block_{nullptr};
};
TORCH_MODULE(Stem);

// A conv block whose output is also stashed as skip tensor `skip{level}` for the decoder.
struct EncoderImpl : nn::Cloneable<EncoderImpl> {
  EncoderImpl(std::string layer, int64_t level, int64_t in, int64_t out)
      : layer_(std::move(layer)), level_(level), in_(in), out_(out) {
    reset();
  }

  void reset() override { block_ = register_module("block", ConvBlock(in_, out_)); }

  pipeline::Batch forward(pipeline::Batch batch) {
    at::Tensor& x = batch.value();
    x = block_->forward(x);
    if (!batch.skips.emplace(skip_name(level_), x).second) {
      throw std::invalid_argument(fmt::format(
          "unet layer '{}': skip tensor '{}' is already in the batch", layer_, skip_name(level_)));
    }
    return batch;
  }

  std::string layer_;
  int64_t level_, in_, out_;
  ConvBlock block_{nullptr};
};
TORCH_MODULE(Encoder);

// Upsamples x2 (nearest), pops `skip{level}`, concatenates it after the upsampled tensor
// along channels and applies a conv block.
struct DecoderImpl : nn::Cloneable<DecoderImpl> {
  DecoderImpl(std::string layer, int64_t level, int64_t in, int64_t skip, int64_t out)
      : layer_(std::move(layer)), level_(level), in_(in), skip_(skip), out_(out) {
    reset();
  }

  void reset() override { block_ = register_module("block", ConvBlock(in_ + skip_, out_)); }

  pipeline::Batch forward(pipeline::Batch batch) {
    const std::string name = skip_name(level_);
    const auto it = batch.skips.find(name);
    if (it == batch.skips.end()) {
      throw std::invalid_argument(
          fmt::format("unet layer '{}': skip tensor '{}' is not in the batch", layer_, name));
    }
    const at::Tensor skip = std::move(it->second);
    batch.skips.erase(it);

    at::Tensor& x = batch.value();
    const at::Tensor up =
        nn::functional::interpolate(x, nn::functional::InterpolateFuncOptions()
                                           .scale_factor(std::vector<double>{2.0, 2.0})
                                           .mode(torch::kNearest));
    if (up.dim() != 4 || skip.dim() != 4 || up.size(0) != skip.size(0) ||
        up.size(2) != skip.size(2) || up.size(3) != skip.size(3)) {
      throw std::invalid_argument(fmt::format(
          "unet layer '{}': upsampled input shape {} does not match skip tensor '{}' of shape {}",
          layer_, shape_of(up), name, shape_of(skip)));
    }
    x = block_->forward(torch::cat({up, skip}, 1));
    return batch;
  }

  std::string layer_;
  int64_t level_, in_, skip_, out_;
  ConvBlock block_{nullptr};
};
TORCH_MODULE(Decoder);

}  // namespace

pipeline::LayerSeq make_unet(const UNetOptions& options) {
  // 2^B must fit an int64_t and H, W >= 2^B must be a sensible image.
  if (options.B < 1 || options.B > 16) {
    throw std::invalid_argument(fmt::format("unet: B must be in [1, 16], got {}", options.B));
  }
  if (options.C < 1 || options.in_channels < 1 || options.out_channels < 1) {
    throw std::invalid_argument(
        fmt::format("unet: C, in_channels and out_channels must be positive, got {}, {}, {}",
                    options.C, options.in_channels, options.out_channels));
  }
  const int64_t B = options.B;
  const int64_t C = options.C;
  pipeline::LayerSeq seq;
  seq.add(pipeline::make_layer("stem", "ConvBlock", Stem("stem", options.in_channels, C, B)));
  for (int64_t i = 0; i < B; ++i) {
    const std::string enc = "enc" + std::to_string(i);
    auto layer = pipeline::make_layer(enc, "EncoderBlock", Encoder(enc, i, C << i, C << (i + 1)),
                                      pipeline::LayerIO::kBatch);
    layer->set_skips({skip_name(i)}, {});
    seq.add(std::move(layer));
    seq.add(pipeline::make_layer("down" + std::to_string(i), "Downsample",
                                 nn::MaxPool2d(nn::MaxPool2dOptions(2).stride(2))));
  }
  seq.add(pipeline::make_layer("bottom", "ConvBlock", ConvBlock(C << B, C << B)));
  for (int64_t i = B - 1; i >= 0; --i) {
    const std::string dec = "dec" + std::to_string(i);
    auto layer = pipeline::make_layer(dec, "DecoderBlock",
                                      Decoder(dec, i, C << (i + 1), C << (i + 1), C << i),
                                      pipeline::LayerIO::kBatch);
    layer->set_skips({}, {skip_name(i)});
    seq.add(std::move(layer));
  }
  seq.add(pipeline::make_layer("head", "Conv1x1",
                               nn::Conv2d(nn::Conv2dOptions(C, options.out_channels, 1))));
  return seq;
}

}  // namespace pipebal::models
