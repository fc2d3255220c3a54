// What the memory tests compare: a model's profiled costs and each stage's measured peak in a
// real pipeline, one micro-batch of GPipe without checkpointing (each stage's peak is then its
// backward's, whatever the timing).
#pragma once

#include <vector>

#include <torch/torch.h>

#include "pipebal/balance/cost_model.h"
#include "pipebal/pipeline/pipeline.h"
#include "pipebal/pipeline/transport.h"
#include "pipebal/profiler/cpu_memory.h"
#include "pipebal/profiler/profile_json.h"
#include "pipebal/profiler/profiler.h"
#include "pipebal/profiler/taken_batch.h"

namespace pipebal::profiler::testing {

// The cost profile of `layers` on `sample`, in few passes: memory is what these tests read.
inline balance::CostProfile quick_cost_profile(const pipeline::LayerSeq& layers,
                                               const pipeline::Batch& sample) {
  ProfileOptions profiling;
  profiling.repeat = 2;
  profiling.warmup = 1;
  profiling.measure_engine = false;
  return cost_profile(profile_model(layers, sample, profiling));
}

// The cost model of the measured run below. Its parameters were made before counting began:
// only their gradients count (param_scale 1).
inline balance::CostOptions one_micro_batch_options() {
  balance::CostOptions options;
  options.chunks = 1;
  options.schedule = pipeline::ScheduleKind::kGPipe;
  options.checkpoint = pipeline::CheckpointMode::kNever;
  options.param_scale = 1;
  return options;
}

// Each stage's peak in the second step of `layers` cut by `balance` (the first makes the
// parameters' gradients), trained on `input` against `target` with the mean squared error: the
// stages' threads count under tags from `tag_base` on, a message taken the taker's.
// With `virtual_stages` above 1 the stages run interleaved, each device's on one thread.
inline std::vector<int64_t> measured_stage_peaks(const pipeline::LayerSeq& layers,
                                                 const std::vector<int>& balance,
                                                 const pipeline::Batch& input,
                                                 const at::Tensor& target, int tag_base,
                                                 int virtual_stages = 1) {
  CpuMemoryScope scope;
  pipeline::PipelineOptions engine;
  engine.chunks = 1;
  engine.schedule =
      virtual_stages > 1 ? pipeline::ScheduleKind::kInterleaved : pipeline::ScheduleKind::kGPipe;
  engine.virtual_stages = virtual_stages;
  engine.checkpoint = pipeline::CheckpointMode::kNever;
  engine.on_stage_enter = [tag_base](int stage) {
    CpuMemoryScope::set_thread_tag(tag_base + stage);
  };
  pipeline::Pipeline pipeline(layers, balance, {}, engine,
                              pipeline::in_process_transport(count_as_taken));
  const auto mse = [](const at::Tensor& out, const at::Tensor& t) {
    return torch::mse_loss(out, t);
  };
  for (int step = 0; step < 2; ++step) {
    scope.reset_peak();
    pipeline.step(input, target, mse);
  }
  std::vector<int64_t> peaks;
  for (size_t s = 0; s < balance.size(); ++s) {
    peaks.push_back(scope.peak_bytes(tag_base + static_cast<int>(s)));
  }
  return peaks;
}

}  // namespace pipebal::profiler::testing
