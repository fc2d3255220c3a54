// See dropout.h.
#include "pipebal/pipeline/dropout.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

namespace pipebal::pipeline {
namespace {

thread_local at::Generator* current_generator = nullptr;

// SplitMix64's output function: a bijective mix whose outputs for consecutive inputs pass
// BigCrush, so hashing (key, element index) gives independent uniform draws per element.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A keep mask scaled by 1 / (1 - p): element i is kept when the top 32 bits of
// mix64(key + (i + 1)·γ) fall below (1 - p)·2³². The draw depends only on the key and the
// element's index — not on the thread that computes it — so the mask is filled in parallel and a
// recomputation with the same key gives the same mask. A counter-based draw costs a few
// multiplies per element, where bernoulli_ on a CPU generator walks mt19937 one element at a time
// (on a float mask, most of dropout's time).
at::Tensor scaled_keep_mask(at::IntArrayRef shape, const at::TensorOptions& options, double p,
                            uint64_t key) {
  at::Tensor mask = at::empty(shape, options);
  const auto threshold = static_cast<uint64_t>(std::llround((1 - p) * 4294967296.0));
  constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, mask.scalar_type(), "dropout_mask", [&] {
        scalar_t* out = mask.data_ptr<scalar_t>();
        const auto kept = static_cast<scalar_t>(1 / (1 - p));
        const auto dropped = static_cast<scalar_t>(0);
        at::parallel_for(0, mask.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            const uint64_t draw = mix64(key + static_cast<uint64_t>(i + 1) * kGolden) >> 32;
            out[i] = draw < threshold ? kept : dropped;
          }
        });
      });
  return mask;
}

// One 64-bit draw from the stage generator: each dropout of a micro-batch gets its own key, and
// re-seeding the generator (recomputation) gives the same keys in the same order.
uint64_t next_key(at::Generator& generator) {
  auto* cpu = at::check_generator<at::CPUGeneratorImpl>(generator);
  const std::lock_guard<std::mutex> lock(generator.mutex());
  return cpu->random64();
}

}  // namespace

DropoutImpl::DropoutImpl(double p) : p_(p) {
  if (p < 0 || p >= 1) {
    throw std::invalid_argument("dropout probability must be in [0, 1), got " + std::to_string(p));
  }
}

at::Tensor DropoutImpl::forward(const at::Tensor& input) {
  return stage_dropout(input, p_, is_training());
}

at::Tensor stage_dropout(const at::Tensor& input, double p, bool train, bool feature) {
  if (!train || p == 0) return input;
  at::Generator* generator = stage_generator();
  if (generator == nullptr || !input.device().is_cpu() || (feature && input.dim() < 2)) {
    return feature ? torch::feature_dropout(input, p, true) : torch::dropout(input, p, true);
  }
  if (p >= 1) return input * 0;
  std::vector<int64_t> shape = input.sizes().vec();
  if (feature) std::fill(shape.begin() + 2, shape.end(), 1);  // one draw per sample and channel
  return input * scaled_keep_mask(shape, input.options(), p, next_key(*generator));
}

at::Generator* stage_generator() {
  return current_generator;
}

StageGeneratorScope::StageGeneratorScope(uint64_t seed)
    : generator_(at::make_generator<at::CPUGeneratorImpl>(seed)), previous_(current_generator) {
  current_generator = &generator_;
}

StageGeneratorScope::~StageGeneratorScope() {
  current_generator = previous_;
}

}  // namespace pipebal::pipeline
