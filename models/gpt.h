// A GPT-style decoder: token + position embedding, pre-norm transformer blocks with causal
// self-attention, a final LayerNorm and a linear head over the vocabulary.
#pragma once

#include <cstdint>

#include "pipebal/pipeline/layer_seq.h"

namespace pipebal::models {

struct GptOptions {
  int64_t layers = 8;
  int64_t dim = 256;
  int64_t heads = 4;
  int64_t seq = 64;  // longest sequence (positions embedded)
  int64_t vocab = 1000;
  int64_t dropout_percent = 0;  // applied after attention and MLP
};

// Input int64 tokens [N, T] with T <= seq; output logits [N, T, vocab]. Layers `embed`,
// `block0`.., `norm`, `head`. Throws std::invalid_argument when dim % heads != 0.
pipeline::LayerSeq make_gpt(const GptOptions& options);

}  // namespace pipebal::models
