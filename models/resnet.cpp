// See resnet.h.
#include "pipebal/models/resnet.h"

#include <stdexcept>
#include <vector>

#include <torch/torch.h>

#include "pipebal/pipeline/batch_norm.h"
#include "pipebal/pipeline/module_layer.h"

namespace pipebal::models {
namespace {

namespace nn = torch::nn;

nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  return nn::Conv2d(
      nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

// One residual block: basic (two 3x3 convs) or bottleneck (1x1, 3x3, 1x1 with 4x expansion),
// with a projection shortcut when the shape changes.
struct ResidualBlockImpl : nn::Cloneable<ResidualBlockImpl> {
  ResidualBlockImpl(int64_t in, int64_t planes, int64_t stride, bool bottleneck)
      : in_(in), planes_(planes), stride_(stride), bottleneck_(bottleneck) {
    reset();
  }

  int64_t out_channels() const { return bottleneck_ ? planes_ * 4 : planes_; }

  void reset() override {
    body_ = nn::Sequential();
    if (bottleneck_) {
      body_->push_back(conv(in_, planes_, 1, 1));
      body_->push_back(pipeline::BatchNorm(planes_));
      body_->push_back(nn::ReLU());
      body_->push_back(conv(planes_, planes_, 3, stride_));
      body_->push_back(pipeline::BatchNorm(planes_));
      body_->push_back(nn::ReLU());
      body_->push_back(conv(planes_, out_channels(), 1, 1));
      body_->push_back(pipeline::BatchNorm(out_channels()));
    } else {
      body_->push_back(conv(in_, planes_, 3, stride_));
      body_->push_back(pipeline::BatchNorm(planes_));
      body_->push_back(nn::ReLU());
      body_->push_back(conv(planes_, planes_, 3, 1));
      body_->push_back(pipeline::BatchNorm(planes_));
    }
    register_module("body", body_);
    shortcut_ = nn::Sequential();
    if (stride_ != 1 || in_ != out_channels()) {
      shortcut_->push_back(conv(in_, out_channels(), 1, stride_));
      shortcut_->push_back(pipeline::BatchNorm(out_channels()));
    }
    register_module("shortcut", shortcut_);
  }

  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor identity = shortcut_->is_empty() ? x : shortcut_->forward(x);
    return torch::relu(body_->forward(x) + identity);
  }

  int64_t in_, planes_, stride_;
  bool bottleneck_;
  nn::Sequential body_{nullptr};
  nn::Sequential shortcut_{nullptr};
};
TORCH_MODULE(ResidualBlock);

std::vector<int64_t> blocks_per_group(int64_t depth) {
  switch (depth) {
    case 18:
      return {2, 2, 2, 2};
    case 34:
    case 50:
      return {3, 4, 6, 3};
    case 101:
      return {3, 4, 23, 3};
    case 152:
      return {3, 8, 36, 3};
    default:
      throw std::invalid_argument("resnet: depth must be one of 18, 34, 50, 101, 152, got " +
                                  std::to_string(depth));
  }
}

}  // namespace

pipeline::LayerSeq make_resnet(const ResNetOptions& options) {
  const std::vector<int64_t> groups = blocks_per_group(options.depth);
  if (options.width < 1 || options.classes < 1) {
    throw std::invalid_argument("resnet: width and classes must be positive");
  }
  const bool bottleneck = options.depth >= 50;
  pipeline::LayerSeq seq;
  seq.add(pipeline::make_layer(
      "stem", "Stem",
      nn::Sequential(conv(3, options.width, 7, 2), pipeline::BatchNorm(options.width), nn::ReLU(),
                     nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)))));
  int64_t channels = options.width;
  for (size_t g = 0; g < groups.size(); ++g) {
    const int64_t planes = options.width << g;
    for (int64_t b = 0; b < groups[g]; ++b) {
      const int64_t stride = (g > 0 && b == 0) ? 2 : 1;
      ResidualBlock block(channels, planes, stride, bottleneck);
      channels = block->out_channels();
      seq.add(pipeline::make_layer("g" + std::to_string(g) + "b" + std::to_string(b),
                                   bottleneck ? "Bottleneck" : "BasicBlock", block));
    }
  }
  seq.add(
      pipeline::make_layer("head", "PoolLinear",
                           nn::Sequential(nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(1)),
                                          nn::Flatten(), nn::Linear(channels, options.classes))));
  return seq;
}

}  // namespace pipebal::models
