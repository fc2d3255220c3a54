// Dropout whose masks a CPU stage can reproduce without a process-wide lock.
//
// LibTorch's dropout draws from ATen's default generator, which every thread shares: to make a
// recomputation replay the same masks, a stage with such a layer seeds that generator per
// micro-batch and holds a lock while it runs (stage.cpp), so such stages take turns. This
// Dropout draws instead from the calling thread's stage generator when one is set — the
// engine sets one per CPU micro-batch (StageGeneratorScope) — and from the default generator
// otherwise (outside the engine, or for tensors on an accelerator). The zoo models use it.
#pragma once

#include <cstdint>

#include <ATen/core/Generator.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

namespace pipebal::pipeline {

struct DropoutImpl : torch::nn::Cloneable<DropoutImpl> {
  explicit DropoutImpl(double p = 0.5);

  void reset() override {}
  at::Tensor forward(const at::Tensor& input);

  double p_;
};
TORCH_MODULE(Dropout);

// Dropout of `input` with probability `p` when `train`: from the calling thread's stage
// generator on a CPU when one is set, else LibTorch's dropout (ATen's default generator). With
// the stage generator, each call draws one 64-bit key and hashes it with every element's index
// (counter-based, like CUDA's Philox dropout): the mask costs a few multiplies per element, is
// filled by all intra-op threads, and is the same whichever thread fills which element.
// `feature`: one draw per sample and channel (dims 0 and 1), shared by the rest, as
// nn.Dropout2d/3d. What pipebal's Dropout and a TorchScript model's rewritten dropout
// (script_dropout.h) run.
at::Tensor stage_dropout(const at::Tensor& input, double p, bool train, bool feature = false);

// The calling thread's stage generator, or nullptr when none is set.
at::Generator* stage_generator();

// Sets a CPU generator seeded with `seed` as the calling thread's stage generator for the
// scope's lifetime (scopes nest; the previous one comes back).
class StageGeneratorScope {
 public:
  explicit StageGeneratorScope(uint64_t seed);
  ~StageGeneratorScope();
  StageGeneratorScope(const StageGeneratorScope&) = delete;
  StageGeneratorScope& operator=(const StageGeneratorScope&) = delete;

 private:
  at::Generator generator_;
  at::Generator* previous_;
};

}  // namespace pipebal::pipeline
