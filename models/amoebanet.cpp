// See amoebanet.h.
#include "pipebal/models/amoebanet.h"

#include <array>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

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

// ---- The genotype ------------------------------------------------------------------------

enum class Op {
  kIdentity,
  kConv1x1,
  kConv3x3,
  kConv1x7x7x1,
  kMaxPool2x2,
  kMaxPool3x3,
  kAvgPool3x3
};

// One branch of a cell: `op` applied to state `input`. States 0 and 1 are the cell's two
// inputs after preprocessing (0: from s1, the previous cell; 1: from s0, the one before);
// branches 2k and 2k+1 are summed into state k + 2.
struct Branch {
  int input;
  Op op;
};

// AmoebaNet-D's genotype in torchgpipe's state order (it reproduces the GPipe paper's
// parameter counts). The normal cell concatenates states {0, 3, 4, 6} as in TensorFlow's
// reference implementation rather than the paper's {4, 5, 6}.
constexpr std::array<Branch, 10> kNormalBranches = {{
    {1, Op::kConv1x1},
    {1, Op::kMaxPool3x3},  // -> state 2
    {1, Op::kIdentity},
    {0, Op::kConv1x7x7x1},  // -> state 3
    {0, Op::kConv1x1},
    {0, Op::kConv1x7x7x1},  // -> state 4
    {2, Op::kMaxPool3x3},
    {2, Op::kIdentity},  // -> state 5
    {1, Op::kAvgPool3x3},
    {5, Op::kConv1x1},  // -> state 6
}};
constexpr std::array<int, 4> kNormalConcat = {0, 3, 4, 6};

constexpr std::array<Branch, 10> kReductionBranches = {{
    {0, Op::kMaxPool2x2},
    {0, Op::kMaxPool3x3},  // -> state 2
    {2, Op::kIdentity},
    {1, Op::kConv3x3},  // -> state 3
    {2, Op::kConv1x7x7x1},
    {2, Op::kMaxPool3x3},  // -> state 4
    {3, Op::kIdentity},
    {1, Op::kMaxPool2x2},  // -> state 5
    {2, Op::kAvgPool3x3},
    {3, Op::kConv1x1},  // -> state 6
}};
constexpr std::array<int, 3> kReductionConcat = {4, 5, 6};
static_assert(kNormalBranches.size() == kReductionBranches.size());

// ---- Operations --------------------------------------------------------------------------

nn::Conv2d conv(int64_t in, int64_t out, torch::ExpandingArray<2> kernel,
                torch::ExpandingArray<2> stride, torch::ExpandingArray<2> padding) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding).bias(false));
}

// ReLU, conv, batch norm: the unit every convolutional branch is made of.
void relu_conv_bn(nn::Sequential& seq, int64_t in, int64_t out, torch::ExpandingArray<2> kernel,
                  torch::ExpandingArray<2> stride, torch::ExpandingArray<2> padding) {
  seq->push_back(nn::ReLU());
  seq->push_back(conv(in, out, kernel, stride, padding));
  seq->push_back(pipeline::BatchNorm(out));
}

// Halves H and W with two 1x1 stride-2 convs, the second offset by one pixel so that together
// they see every position; used where a stride-2 identity is needed.
struct FactorizedReduceImpl : nn::Cloneable<FactorizedReduceImpl> {
  FactorizedReduceImpl(int64_t in, int64_t out) : in_(in), out_(out) { reset(); }

  void reset() override {
    even_ = register_module("even", conv(in_, out_ / 2, 1, 2, 0));
    odd_ = register_module("odd", conv(in_, out_ - out_ / 2, 1, 2, 0));
    bn_ = register_module("bn", pipeline::BatchNorm(out_));
  }

  at::Tensor forward(const at::Tensor& input) {
    const at::Tensor x = torch::relu(input);
    // Shift by one pixel, zero-padding the far edge so both halves have the same size.
    const at::Tensor shifted = nn::functional::pad(x.slice(2, 1).slice(3, 1),
                                                   nn::functional::PadFuncOptions({0, 1, 0, 1}));
    return bn_->forward(torch::cat({even_->forward(x), odd_->forward(shifted)}, 1));
  }

  int64_t in_, out_;
  nn::Conv2d even_{nullptr}, odd_{nullptr};
  pipeline::BatchNorm bn_{nullptr};
};
TORCH_MODULE(FactorizedReduce);

// One branch operation on `c` channels; `stride` is 2 for reduction-cell branches that read
// the cell inputs, 1 otherwise.
nn::Sequential make_op(Op op, int64_t c, int64_t stride) {
  nn::Sequential seq;
  switch (op) {
    case Op::kIdentity:
      if (stride == 1) {
        seq->push_back(nn::Identity());
      } else {
        seq->push_back(FactorizedReduce(c, c));
      }
      break;
    case Op::kConv1x1:
      relu_conv_bn(seq, c, c, 1, stride, 0);
      break;
    case Op::kConv3x3:  // bottlenecked to c/4 channels
      relu_conv_bn(seq, c, c / 4, 1, 1, 0);
      relu_conv_bn(seq, c / 4, c / 4, 3, stride, 1);
      relu_conv_bn(seq, c / 4, c, 1, 1, 0);
      break;
    case Op::kConv1x7x7x1:  // factorised 7x7, bottlenecked to c/4 channels
      relu_conv_bn(seq, c, c / 4, 1, 1, 0);
      relu_conv_bn(seq, c / 4, c / 4, {1, 7}, {1, stride}, {0, 3});
      relu_conv_bn(seq, c / 4, c / 4, {7, 1}, {stride, 1}, {3, 0});
      relu_conv_bn(seq, c / 4, c, 1, 1, 0);
      break;
    case Op::kMaxPool2x2:
      seq->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(2).stride(stride)));
      break;
    case Op::kMaxPool3x3:  // torchgpipe builds an average pool here; the genotype says max
      seq->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(stride).padding(1)));
      break;
    case Op::kAvgPool3x3:
      seq->push_back(nn::AvgPool2d(
          nn::AvgPool2dOptions(3).stride(stride).padding(1).count_include_pad(false)));
      break;
  }
  return seq;
}

// ---- Layers ------------------------------------------------------------------------------

// 3x3 stride-2 conv and batch norm; checks the input so that a bad shape is reported here
// rather than as a size mismatch inside some cell.
struct StemImpl : nn::Cloneable<StemImpl> {
  static constexpr int64_t kDivisor = 32;  // the stem, four reduction cells: five stride-2 steps

  StemImpl(std::string layer, int64_t in, int64_t out)
      : layer_(std::move(layer)), in_(in), out_(out) {
    reset();
  }

  void reset() override {
    conv_ = register_module("conv", conv(in_, out_, 3, 2, 1));
    bn_ = register_module("bn", pipeline::BatchNorm(out_));
  }

  at::Tensor forward(const at::Tensor& x) {
    if (x.dim() != 4 || x.size(1) != in_) {
      throw std::invalid_argument(
          fmt::format("amoebanetd layer '{}': input shape {}, expected [N, {}, H, W]", layer_,
                      shape_of(x), in_));
    }
    if (x.size(2) % kDivisor != 0 || x.size(3) % kDivisor != 0) {
      throw std::invalid_argument(
          fmt::format("amoebanetd layer '{}': input shape {}: H and W must be divisible by {}",
                      layer_, shape_of(x), kDivisor));
    }
    return bn_->forward(conv_->forward(x));
  }

  std::string layer_;
  int64_t in_, out_;
  nn::Conv2d conv_{nullptr};
  pipeline::BatchNorm bn_{nullptr};
};
TORCH_MODULE(Stem);

struct CellOptions {
  int64_t prev_prev = 0;  // channels of s0
  int64_t prev = 0;       // channels of s1
  int64_t channels = 0;   // channels of every branch
  bool reduction = false;
  bool reduction_prev = false;  // s0 has twice the H and W of s1
};

// A normal or reduction cell: {s1, s0} -> {concatenated states, s1}.
struct CellImpl : nn::Cloneable<CellImpl> {
  CellImpl(std::string layer, CellOptions options) : layer_(std::move(layer)), options_(options) {
    reset();
  }

  const Branch* branches() const {
    return options_.reduction ? kReductionBranches.data() : kNormalBranches.data();
  }
  std::vector<int> concat() const {
    if (options_.reduction) return {kReductionConcat.begin(), kReductionConcat.end()};
    return {kNormalConcat.begin(), kNormalConcat.end()};
  }
  int64_t out_channels() const { return options_.channels * static_cast<int64_t>(concat().size()); }

  void reset() override {
    const int64_t c = options_.channels;
    preprocess1_ = nn::Sequential();
    relu_conv_bn(preprocess1_, options_.prev, c, 1, 1, 0);
    register_module("preprocess1", preprocess1_);

    preprocess0_ = nn::Sequential();
    if (options_.reduction_prev) {
      preprocess0_->push_back(FactorizedReduce(options_.prev_prev, c));
    } else if (options_.prev_prev != c) {
      relu_conv_bn(preprocess0_, options_.prev_prev, c, 1, 1, 0);
    } else {
      preprocess0_->push_back(nn::Identity());
    }
    register_module("preprocess0", preprocess0_);

    ops_.clear();  // Cloneable::clone() calls reset() on a copy of this object
    for (size_t i = 0; i < kNormalBranches.size(); ++i) {
      const Branch& branch = branches()[i];
      const int64_t stride = options_.reduction && branch.input < 2 ? 2 : 1;
      ops_.push_back(register_module("op" + std::to_string(i), make_op(branch.op, c, stride)));
    }
  }

  pipeline::Batch forward(pipeline::Batch batch) {
    if (batch.tensors.empty() || batch.tensors.size() > 2) {
      throw std::invalid_argument(fmt::format(
          "amoebanetd layer '{}': expected a batch of 1 or 2 tensors {{s1, s0}}, got {}", layer_,
          batch.tensors.size()));
    }
    const at::Tensor s1 = batch.tensors[0];
    const at::Tensor& s0 = batch.tensors.size() == 2 ? batch.tensors[1] : s1;

    std::vector<at::Tensor> states = {preprocess1_->forward(s1), preprocess0_->forward(s0)};
    const Branch* b = branches();
    for (size_t i = 0; i < ops_.size(); i += 2) {
      states.push_back(ops_[i]->forward(states.at(b[i].input)) +
                       ops_[i + 1]->forward(states.at(b[i + 1].input)));
    }
    std::vector<at::Tensor> outputs;
    for (int index : concat()) outputs.push_back(states.at(index));

    batch.tensors = {torch::cat(outputs, 1), s1};
    return batch;
  }

  std::string layer_;
  CellOptions options_;
  nn::Sequential preprocess1_{nullptr}, preprocess0_{nullptr};
  std::vector<nn::Sequential> ops_;
};
TORCH_MODULE(Cell);

// Global average pool and a linear layer on the last cell's output; drops s1.
struct ClassifierImpl : nn::Cloneable<ClassifierImpl> {
  ClassifierImpl(int64_t in, int64_t classes) : in_(in), classes_(classes) { reset(); }

  void reset() override { fc_ = register_module("fc", nn::Linear(in_, classes_)); }

  pipeline::Batch forward(pipeline::Batch batch) {
    const at::Tensor pooled = torch::adaptive_avg_pool2d(batch.value(), {1, 1}).flatten(1);
    batch.tensors = {fc_->forward(pooled)};
    return batch;
  }

  int64_t in_, classes_;
  nn::Linear fc_{nullptr};
};
TORCH_MODULE(Classifier);

}  // namespace

pipeline::LayerSeq make_amoebanet(const AmoebaNetOptions& options) {
  if (options.L < 1) {
    throw std::invalid_argument(fmt::format("amoebanetd: L must be at least 1, got {}", options.L));
  }
  // Branches of the first stem reduction cell have D/2 channels and bottleneck them to D/8.
  if (options.D < 8 || options.D % 8 != 0) {
    throw std::invalid_argument(
        fmt::format("amoebanetd: D must be a positive multiple of 8, got {}", options.D));
  }
  if (options.classes < 1 || options.in_channels < 1) {
    throw std::invalid_argument(
        fmt::format("amoebanetd: classes and in_channels must be positive, got {}, {}",
                    options.classes, options.in_channels));
  }

  pipeline::LayerSeq seq;
  int64_t channels = options.D / 4;
  seq.add(pipeline::make_layer("stem", "Stem", Stem("stem", options.in_channels, channels)));

  // Channel bookkeeping across cells: s1 has `prev` channels, s0 `prev_prev`.
  int64_t prev_prev = channels;
  int64_t prev = channels;
  bool reduction_prev = false;
  int reductions = 0;
  int normals = 0;
  auto add_cell = [&](bool reduction) {
    if (reduction) channels *= 2;
    const std::string name =
        reduction ? "reduce" + std::to_string(reductions++) : "cell" + std::to_string(normals++);
    Cell cell(name, CellOptions{prev_prev, prev, channels, reduction, reduction_prev});
    prev_prev = prev;
    prev = cell->out_channels();
    reduction_prev = reduction;
    seq.add(pipeline::make_layer(name, reduction ? "ReductionCell" : "NormalCell", cell,
                                 pipeline::LayerIO::kBatch));
  };

  add_cell(true);
  add_cell(true);
  for (int group = 0; group < 3; ++group) {
    if (group > 0) add_cell(true);
    for (int64_t i = 0; i < options.L; ++i) add_cell(false);
  }
  seq.add(pipeline::make_layer("head", "Classifier", Classifier(prev, options.classes),
                               pipeline::LayerIO::kBatch));
  return seq;
}

}  // namespace pipebal::models
