// A message is its sender's memory until the receiver takes it, as the simulator's timed peak
// counts it. Stage 1's forward waits at a gate until stage 0 has made every micro-batch's output,
// so on stage 0 they all wait at once (the first taken before the second is made, the last made
// before the gate opens); given stage-1 forwards that long, the simulator predicts that peak from
// the profiled costs. The micro-batches are checkpointed (all but the last), so stage 0 does not
// keep their outputs to back-propagate from: only the waiting holds them.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "pipebal/balance/cost_model.h"
#include "pipebal/balance/simulator.h"
#include "pipebal/pipeline/module_layer.h"
#include "pipebal/pipeline/pipeline.h"
#include "pipebal/pipeline/transport.h"
#include "pipebal/profiler/cpu_memory.h"
#include "pipebal/profiler/profile_json.h"
#include "pipebal/profiler/profiler.h"
#include "pipebal/profiler/taken_batch.h"
#include "tests/support/stage_peaks.h"

namespace pipebal::profiler {
namespace {

namespace nn = torch::nn;

constexpr int kChunks = 8;
constexpr int64_t kRows = 256;   // per micro-batch
constexpr int64_t kWidth = 256;  // a message: 256 x 256 floats, 256 KiB
constexpr int64_t kMessageBytes = kRows * kWidth * 4;
constexpr int kTagBase = 40;

// Counts stage 0's forwards; while armed, stage 1's forwards wait for kChunks of them, and
// stage 0's second forward waits for stage 1 to have taken the first message (as the simulated
// stage 1 does at once), however late its thread starts.
struct Gate {
  std::mutex mutex;
  std::condition_variable changed;
  bool armed = false;
  int forwards = 0;  // stage 0's
  int entered = 0;   // stage 1's

  void arm(bool on) {
    std::lock_guard<std::mutex> lock(mutex);
    armed = on;
    forwards = entered = 0;
  }
  // Stage 0, before a forward.
  void before_forward() {
    std::unique_lock<std::mutex> lock(mutex);
    if (armed && forwards >= 1) wait_until(lock, [this] { return entered >= 1; });
  }
  // Stage 0, after a forward.
  void count() {
    std::lock_guard<std::mutex> lock(mutex);
    ++forwards;
    changed.notify_all();
  }
  // Stage 1, before a forward.
  void wait() {
    std::unique_lock<std::mutex> lock(mutex);
    ++entered;
    changed.notify_all();
    if (armed) wait_until(lock, [this] { return forwards >= kChunks; });
  }

 private:
  // Bounded, so that a broken engine fails the test instead of hanging it.
  template <typename Done>
  void wait_until(std::unique_lock<std::mutex>& lock, Done done) {
    if (!changed.wait_for(lock, std::chrono::seconds(60), done))
      throw std::runtime_error("the gate never opened");
  }
};
Gate gate;

// The output exists before the count: stage 1 cannot take anything while it is made.
struct CountedLinearImpl : nn::Cloneable<CountedLinearImpl> {
  CountedLinearImpl() { reset(); }
  void reset() override { fc = register_module("fc", nn::Linear(kWidth, kWidth)); }
  at::Tensor forward(const at::Tensor& x) {
    gate.before_forward();
    at::Tensor out = fc->forward(x);
    gate.count();
    return out;
  }
  nn::Linear fc{nullptr};
};
TORCH_MODULE(CountedLinear);

struct GatedLinearImpl : nn::Cloneable<GatedLinearImpl> {
  GatedLinearImpl() { reset(); }
  void reset() override { fc = register_module("fc", nn::Linear(kWidth, kWidth)); }
  at::Tensor forward(const at::Tensor& x) {
    gate.wait();
    return fc->forward(x);
  }
  nn::Linear fc{nullptr};
};
TORCH_MODULE(GatedLinear);

at::Tensor mse(const at::Tensor& out, const at::Tensor& target) {
  return torch::mse_loss(out, target);
}

TEST(WaitingMessages, AreTheSendersMemoryAsTheTimedPeakPredicts) {
  torch::manual_seed(0);
  pipeline::LayerSeq layers("gated");
  layers.add(pipeline::make_layer("counted", "CountedLinear", CountedLinear()));
  layers.add(pipeline::make_layer("gated", "GatedLinear", GatedLinear()));

  // The prediction: profiled memory terms, durations by hand (stage 1's forward as long as
  // stage 0's kChunks forwards and one more), no transfer time.
  const auto checkpoint = pipeline::CheckpointMode::kExceptLast;
  const balance::CostProfile profile =
      testing::quick_cost_profile(layers, pipeline::Batch(torch::randn({kRows, kWidth})));
  // A CPU profile: stage 0 takes views of the input made outside the stages, holding none of
  // it. The parameters were made before counting began too: only their gradients count
  // (param_scale 1).
  ASSERT_EQ(profile.layers[0].input_bytes, 0);
  balance::CostOptions options;
  options.chunks = kChunks;
  options.schedule = pipeline::ScheduleKind::kGPipe;
  options.checkpoint = checkpoint;
  options.param_scale = 1;
  const balance::CostModel model(profile.layers, 2, options);
  const balance::SimulationResult predicted =
      balance::simulate(model.schedule(), {{1, 1, 1}, {kChunks + 1.0, kChunks + 1.0, 1}}, {0.0},
                        {model.memory_terms(0, 0, 1), model.memory_terms(1, 1, 2)});
  const balance::StageMemory first = model.memory_terms(0, 0, 1);
  ASSERT_EQ(first.output_bytes, kMessageBytes);
  ASSERT_EQ(first.activation_bytes, kMessageBytes);  // the output, kept when not checkpointed
  // At the end of stage 0's last forward outputs 1 to kChunks - 2 wait; the last is kept.
  EXPECT_EQ(predicted.timed_peak_bytes[0], first.fixed_bytes + (kChunks - 1) * kMessageBytes);
  ASSERT_LT(predicted.peak_bytes[0], first.fixed_bytes + 4 * kMessageBytes);

  // The measurement: the second step (the first makes the gradients), each stage's allocations
  // under its tag, a message taken the taker's.
  CpuMemoryScope scope;
  pipeline::PipelineOptions engine;
  engine.chunks = kChunks;
  engine.schedule = pipeline::ScheduleKind::kGPipe;
  engine.checkpoint = checkpoint;
  engine.on_stage_enter = [](int stage) { CpuMemoryScope::set_thread_tag(kTagBase + stage); };
  pipeline::Pipeline pipeline(layers, {1, 1}, {}, engine,
                              pipeline::in_process_transport(count_as_taken));
  const pipeline::Batch input(torch::randn({kChunks * kRows, kWidth}));
  const at::Tensor target = torch::randn({kChunks * kRows, kWidth});
  for (int step = 0; step < 2; ++step) {
    gate.arm(true);
    scope.reset_peak();
    pipeline.step(input, target, mse);
  }
  gate.arm(false);
  const int64_t measured = scope.peak_bytes(kTagBase);
  EXPECT_NEAR(static_cast<double>(measured), static_cast<double>(predicted.timed_peak_bytes[0]),
              kMessageBytes / 8.0);
}

}  // namespace
}  // namespace pipebal::profiler
