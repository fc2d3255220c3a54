// See gpt.h.
#include "pipebal/models/gpt.h"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>
#include <torch/torch.h>

#include "pipebal/pipeline/dropout.h"
#include "pipebal/pipeline/module_layer.h"

namespace pipebal::models {
namespace {

namespace nn = torch::nn;

struct EmbeddingImpl : nn::Cloneable<EmbeddingImpl> {
  EmbeddingImpl(int64_t vocab, int64_t seq, int64_t dim) : vocab_(vocab), seq_(seq), dim_(dim) {
    reset();
  }
  void reset() override {
    tokens_ = register_module("tokens", nn::Embedding(vocab_, dim_));
    positions_ = register_module("positions", nn::Embedding(seq_, dim_));
  }
  at::Tensor forward(const at::Tensor& ids) {
    if (ids.dim() != 2 || ids.size(1) > seq_) {
      throw std::invalid_argument(
          fmt::format("gpt embedding: expected token ids [N, T] with T <= {}, got {}", seq_,
                      c10::str(ids.sizes())));
    }
    const at::Tensor positions = torch::arange(ids.size(1), ids.options().dtype(torch::kLong));
    return tokens_->forward(ids) + positions_->forward(positions).unsqueeze(0);
  }
  int64_t vocab_, seq_, dim_;
  nn::Embedding tokens_{nullptr}, positions_{nullptr};
};
TORCH_MODULE(Embedding);

// Pre-norm block: x + attention(norm(x)), then x + mlp(norm(x)).
struct DecoderBlockImpl : nn::Cloneable<DecoderBlockImpl> {
  DecoderBlockImpl(int64_t dim, int64_t heads, double dropout)
      : dim_(dim), heads_(heads), dropout_(dropout) {
    reset();
  }
  void reset() override {
    norm1_ = register_module("norm1", nn::LayerNorm(nn::LayerNormOptions({dim_})));
    qkv_ = register_module("qkv", nn::Linear(dim_, 3 * dim_));
    proj_ = register_module("proj", nn::Linear(dim_, dim_));
    norm2_ = register_module("norm2", nn::LayerNorm(nn::LayerNormOptions({dim_})));
    mlp_ = register_module(
        "mlp", nn::Sequential(nn::Linear(dim_, 4 * dim_), nn::GELU(), nn::Linear(4 * dim_, dim_)));
    drop_ = register_module("drop", pipeline::Dropout(dropout_));
  }
  at::Tensor attention(const at::Tensor& x) {
    const int64_t n = x.size(0), t = x.size(1), head_dim = dim_ / heads_;
    auto parts = qkv_->forward(x).view({n, t, 3, heads_, head_dim}).permute({2, 0, 3, 1, 4});
    const at::Tensor q = parts[0], k = parts[1], v = parts[2];  // [n, heads, t, head_dim]
    at::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(head_dim));
    const at::Tensor future = torch::ones({t, t}, x.options().dtype(torch::kBool)).triu(1);
    scores = scores.masked_fill(future, -std::numeric_limits<float>::infinity());
    const at::Tensor mixed = torch::matmul(torch::softmax(scores, -1), v);
    return proj_->forward(mixed.transpose(1, 2).reshape({n, t, dim_}));
  }
  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor h = x + drop_->forward(attention(norm1_->forward(x)));
    return h + drop_->forward(mlp_->forward(norm2_->forward(h)));
  }
  int64_t dim_, heads_;
  double dropout_;
  nn::LayerNorm norm1_{nullptr}, norm2_{nullptr};
  nn::Linear qkv_{nullptr}, proj_{nullptr};
  nn::Sequential mlp_{nullptr};
  pipeline::Dropout drop_{nullptr};
};
TORCH_MODULE(DecoderBlock);

}  // namespace

pipeline::LayerSeq make_gpt(const GptOptions& options) {
  if (options.dim < 1 || options.heads < 1 || options.dim % options.heads != 0) {
    throw std::invalid_argument(fmt::format(
        "gpt: dim ({}) must be a positive multiple of heads ({})", options.dim, options.heads));
  }
  if (options.dropout_percent < 0 || options.dropout_percent >= 100) {
    throw std::invalid_argument(
        fmt::format("gpt: dropout is a percentage in [0, 100), got {}", options.dropout_percent));
  }
  pipeline::LayerSeq seq;
  seq.add(pipeline::make_layer("embed", "Embedding",
                               Embedding(options.vocab, options.seq, options.dim)));
  for (int64_t i = 0; i < options.layers; ++i) {
    seq.add(pipeline::make_layer(
        "block" + std::to_string(i), "DecoderBlock",
        DecoderBlock(options.dim, options.heads, options.dropout_percent / 100.0)));
  }
  seq.add(pipeline::make_layer("norm", "LayerNorm",
                               nn::LayerNorm(nn::LayerNormOptions({options.dim}))));
  seq.add(pipeline::make_layer("head", "Linear", nn::Linear(options.dim, options.vocab)));
  return seq;
}

}  // namespace pipebal::models
