// The profiler's times, and the promises it makes about the caller's model (its weights,
// gradients, generator and input left as found). Its byte counts: profiler_bytes_test.cpp.
#include "pipebal/profiler/profiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "pipebal/common/cores.h"
#include "pipebal/models/zoo.h"
#include "pipebal/pipeline/module_layer.h"
#include "pipebal/profiler/engine_overhead.h"
#include "tests/profiler/profiler_test_support.h"

namespace pipebal::profiler {
namespace {

namespace nn = torch::nn;
using pipeline::Batch;
using pipeline::LayerSeq;
using testing::add_identity;
using testing::kFloat;
using testing::quick;

// Sleeps `ms` in its forward: a lower bound on its time that no load can shorten.
struct SleepImpl : nn::Cloneable<SleepImpl> {
  explicit SleepImpl(int ms) : ms_(ms) {}
  void reset() override {}
  at::Tensor forward(const at::Tensor& x) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
    return x * 1.0;
  }
  int ms_;
};
TORCH_MODULE(Sleep);

// Each layer's time is its own: every sample of a layer that sleeps k ms is at least k ms, and
// the sleeps are not charged to the layer before. (How close times come to a whole step is a
// benchmark's question: bench/profiler_bench, reports/profiler-bench.md.)
TEST(ProfilerTiming, EachLayerIsChargedItsOwnTime) {
  LayerSeq seq("sleeps");
  seq.add(pipeline::make_layer("fc", "Linear", nn::Linear(8, 8)));
  seq.add(pipeline::make_layer("short", "Sleep", Sleep(3)));
  seq.add(pipeline::make_layer("long", "Sleep", Sleep(12)));
  ProfileOptions options = quick();
  const Profile p = profile_model(seq, Batch(torch::randn({4, 8})), options);
  for (double ms : p.layers[1].forward_samples_ms) EXPECT_GE(ms, 3.0);
  for (double ms : p.layers[2].forward_samples_ms) EXPECT_GE(ms, 12.0);
  EXPECT_EQ(p.layers[2].forward_samples_ms.size(), 3u);
  EXPECT_GT(p.layers[0].forward_ms, 0.0);
}

// The layers' forward and backward times add up to the median pass over the model, as a stage's
// layers run: computed from the profile's own samples, sample i of every layer from pass i.
TEST(Profiler, LayersAddUpToTheMedianPass) {
  const Profile p = profile_model(models::build_model("mlp:layers=6,width=32", 1).layers,
                                  Batch(torch::randn({8, 32})), quick());
  for (const bool forward : {true, false}) {
    std::vector<double> passes;
    double sum = 0;
    for (const LayerProfile& layer : p.layers) {
      const std::vector<double>& samples =
          forward ? layer.forward_samples_ms : layer.backward_samples_ms;
      passes.resize(samples.size());
      for (size_t i = 0; i < samples.size(); ++i) passes[i] += samples[i];
      sum += forward ? layer.forward_ms : layer.backward_ms;
    }
    ASSERT_EQ(passes.size(), 3u);
    std::sort(passes.begin(), passes.end());
    EXPECT_NEAR(sum, passes[1], 1e-9 * passes[1]) << (forward ? "forward" : "backward");
  }
}

TEST(Profiler, KeepsSamplesAndSpread) {
  LayerSeq seq("one");
  seq.add(pipeline::make_layer("fc", "Linear", nn::Linear(8, 8)));
  ProfileOptions options;
  options.warmup = 0;
  options.repeat = 5;
  const Profile p = profile_model(seq, Batch(torch::randn({4, 8})), options);
  const LayerProfile& fc = p.layers[0];
  EXPECT_EQ(fc.forward_samples_ms.size(), 5u);
  EXPECT_EQ(fc.backward_samples_ms.size(), 5u);
  EXPECT_LE(fc.forward_p10_ms, fc.forward_ms);
  EXPECT_LE(fc.forward_ms, fc.forward_p90_ms);
  EXPECT_GT(fc.backward_ms, 0.0);  // weight gradient, even without an input gradient
  EXPECT_EQ(p.backend, "wallclock");
  EXPECT_EQ(p.batch_size, 4);
  EXPECT_EQ(p.dtype, "float32");
  EXPECT_EQ(p.environment.repeat, 5);
  EXPECT_FALSE(p.environment.libtorch_version.empty());
  EXPECT_FALSE(p.environment.gpu_name.has_value());
  // On a CPU the engine's own costs are measured too, unless switched off.
  ASSERT_TRUE(p.engine.has_value());
  EXPECT_TRUE(std::isfinite(p.engine->step_ms) && p.engine->step_ms >= 0);
  EXPECT_TRUE(std::isfinite(p.engine->action_ms) && p.engine->action_ms >= 0);
  EXPECT_TRUE(std::isfinite(p.engine->handoff_ms) && p.engine->handoff_ms >= 0);
  options.measure_engine = false;
  EXPECT_FALSE(profile_model(seq, Batch(torch::randn({4, 8})), options).engine.has_value());
}

// Measuring the engine's costs builds and trains a small model, whose weights and data draw from
// ATen's default generator: the draws after it are those a caller seeded.
TEST(Profiler, MeasuringTheEngineLeavesTheSeededStreamAlone) {
  torch::manual_seed(11);
  const at::Tensor expected = torch::randn({4});
  torch::manual_seed(11);
  const balance::EngineCost cost = measure_engine_cost(3);
  EXPECT_TRUE(torch::equal(torch::randn({4}), expected));
  EXPECT_GE(cost.step_ms, 0.0);
  EXPECT_GE(cost.action_ms, 0.0);
  EXPECT_GE(cost.handoff_ms, 0.0);
}

// A model's dropout draws from ATen's default generator as the profile runs it: the draws after
// the profile are those a caller seeded.
TEST(Profiler, ProfilingDropoutLeavesTheSeededStreamAlone) {
  LayerSeq seq("dropout");
  seq.add(pipeline::make_layer("fc", "Linear", nn::Linear(8, 8)));
  seq.add(pipeline::make_layer("drop", "Dropout", nn::Dropout(0.5)));
  const Batch sample(torch::randn({4, 8}));
  torch::manual_seed(12);
  const at::Tensor expected = torch::randn({4});
  torch::manual_seed(12);
  ProfileOptions options = quick();
  options.measure_engine = false;
  profile_model(seq, sample, options);
  EXPECT_TRUE(torch::equal(torch::randn({4}), expected));
}

// Each layer's timed backward is its own autograd run, where a stage runs one over all its
// layers: the run's cost is taken off every backward (and B) that ran one, and off nothing else.
// A cost larger than any layer's leaves those at exactly 0.
TEST(Profiler, TakesTheAutogradRunsCostOffEachBackwardThatRanOne) {
  LayerSeq seq("two");
  add_identity(seq);  // its output needs no gradient: its backward runs nothing
  seq.add(pipeline::make_layer("fc", "Linear", nn::Linear(8, 8)));
  ProfileOptions options = quick();
  options.measure_engine = false;
  options.autograd_run_ms = 1e3;
  const Profile p = profile_model(seq, Batch(torch::randn({4, 8})), options);
  ASSERT_EQ(p.environment.autograd_run_ms, 1e3);
  EXPECT_EQ(environment_to_json(p.environment).at("autograd_run_ms"), 1e3);
  const LayerProfile& fc = p.layers[1];
  ASSERT_EQ(fc.backward_samples_ms.size(), 3u);
  for (double ms : fc.backward_samples_ms) EXPECT_EQ(ms, 0.0);
  ASSERT_FALSE(fc.input_grad_samples_ms.empty());
  for (double ms : fc.input_grad_samples_ms) EXPECT_EQ(ms, 0.0);
  for (double ms : fc.forward_samples_ms) EXPECT_GT(ms, 0.0);
  for (double ms : fc.weight_samples_ms) EXPECT_GT(ms, 0.0);  // one run per layer in a stage too
  const LayerProfile& id = p.layers[0];
  EXPECT_GT(*std::max_element(id.backward_samples_ms.begin(), id.backward_samples_ms.end()), 0.0);

  // Unset on the CPU: measured.
  options.autograd_run_ms.reset();
  const Profile measured = profile_model(seq, Batch(torch::randn({4, 8})), options);
  ASSERT_TRUE(measured.environment.autograd_run_ms.has_value());
  EXPECT_TRUE(std::isfinite(*measured.environment.autograd_run_ms));

  options.autograd_run_ms = -1;
  EXPECT_THROW(profile_model(seq, Batch(torch::randn({4, 8})), options), std::invalid_argument);
}

// The last stage computes the loss inside its backward action; so does the profile of the
// last layer when given the loss. The loss here sleeps 20 ms: every backward sample of the last
// layer is at least that.
TEST(Profiler, LastLayerBackwardIncludesTheLoss) {
  LayerSeq seq("two");
  seq.add(pipeline::make_layer("fc0", "Linear", nn::Linear(8, 8)));
  seq.add(pipeline::make_layer("fc1", "Linear", nn::Linear(8, 3)));
  ProfileOptions options;
  options.warmup = 1;
  options.repeat = 3;
  int calls = 0;
  const at::Tensor target = torch::randn({4, 3});
  options.loss = [&](const at::Tensor& output) {
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return torch::mse_loss(output, target);
  };
  const Profile p = profile_model(seq, Batch(torch::randn({4, 8})), options);
  // The memory measurement's warm-up and its own pass, then the timed passes' warm-up, the timed
  // passes and one pass timing B and W apart (one after every second timed pass).
  EXPECT_EQ(calls, options.warmup + 1 + options.warmup + options.repeat + 1);
  ASSERT_EQ(p.layers[1].backward_samples_ms.size(), 3u);
  ASSERT_EQ(p.layers[1].weight_samples_ms.size(), 1u);
  ASSERT_EQ(p.layers[1].input_grad_samples_ms.size(), 1u);
  // B of the last layer includes the loss, as its whole backward does.
  EXPECT_GE(p.layers[1].input_grad_ms, 20.0);
  // The first layer's input needs no gradient: its W is its whole backward, the last one's W
  // only the weight gradients (the loss and the input's gradient are B's).
  EXPECT_GT(p.layers[0].weight_ms, 0);
  EXPECT_LT(p.layers[1].weight_ms, 20.0);
  for (double ms : p.layers[1].backward_samples_ms) EXPECT_GE(ms, 20.0);
}

// Every pass sleeps 10 ms, so a 50 ms budget is spent after at most 5 passes, whatever the load.
TEST(Profiler, TimeBudgetStopsEarly) {
  LayerSeq seq("budget");
  seq.add(pipeline::make_layer("sleep", "Sleep", Sleep(10)));
  ProfileOptions options;
  options.warmup = 0;
  options.repeat = 1000;
  options.time_budget_s = 0.05;
  const Profile p = profile_model(seq, Batch(torch::randn({8, 64})), options);
  EXPECT_GE(p.layers[0].forward_samples_ms.size(), 1u);
  EXPECT_LE(p.layers[0].forward_samples_ms.size(), 5u);
}

TEST(Profiler, LeavesTheModelBitIdenticalAndGradientFree) {
  models::Model model = models::build_model("resnet:depth=18,width=8", /*seed=*/3);
  model.layers.train(false);
  std::vector<at::Tensor> before;
  for (const at::Tensor& t : model.layers.parameters()) before.push_back(t.clone());
  for (const at::Tensor& t : model.layers.buffers()) before.push_back(t.clone());
  const at::Tensor input = torch::randn({2, 3, 16, 16});
  const at::Tensor input_copy = input.clone();

  profile_model(model.layers, Batch(input), quick());

  std::vector<at::Tensor> after = model.layers.parameters();
  for (const at::Tensor& t : model.layers.buffers()) after.push_back(t);
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_TRUE(torch::equal(after[i], before[i])) << "tensor " << i;
  }
  for (const at::Tensor& p : model.layers.parameters()) EXPECT_FALSE(p.grad().defined());
  EXPECT_FALSE(model.layers[0].is_training());
  EXPECT_TRUE(torch::equal(input, input_copy));
  EXPECT_FALSE(input.requires_grad());
}

// Scales by a weight, and records at each forward whether the weight has a gradient, which the
// backward of that pass will add into (the profiler may run a copy: the record is shared).
std::vector<bool> g_weight_had_grad;
struct GradProbeImpl : torch::nn::Cloneable<GradProbeImpl> {
  GradProbeImpl() { reset(); }
  void reset() override { weight = register_parameter("weight", torch::ones({8})); }
  at::Tensor forward(const at::Tensor& x) {
    g_weight_had_grad.push_back(weight.grad().defined());
    return x * weight;
  }
  at::Tensor weight;
};
TORCH_MODULE(GradProbe);

// A training step's backward adds into the parameters' gradients (zeroed, not none: every
// micro-batch but a step's first, and all of them under LibTorch 1.x's zero_grad), a pass over
// every gradient more than handing its own over: the timed passes do the same.
TEST(Profiler, TimedBackwardsAddIntoGradientsAsATrainingStepDoes) {
  LayerSeq seq("probe");
  seq.add(pipeline::make_layer("a", "Linear", torch::nn::Linear(8, 8)));
  seq.add(pipeline::make_layer("probe", "GradProbe", GradProbe()));
  g_weight_had_grad.clear();
  ProfileOptions options;
  options.warmup = 1;
  options.repeat = 4;
  options.measure_engine = false;
  profile_model(seq, Batch(torch::randn({4, 8})), options);
  // The last passes: 4 whole ones and a split one after every second.
  ASSERT_GE(g_weight_had_grad.size(), 6u);
  for (size_t i = g_weight_had_grad.size() - 6; i < g_weight_had_grad.size(); ++i) {
    EXPECT_TRUE(g_weight_had_grad[i]) << "timed pass " << i;
  }
  for (const at::Tensor& p : seq.parameters()) EXPECT_FALSE(p.grad().defined());
}

TEST(Profiler, UNetSkipTensorsCountAcrossTheBoundary) {
  models::Model model = models::build_model("unet:B=2,C=4", /*seed=*/0);
  const Profile p = profile_model(model.layers, Batch(torch::randn({2, 3, 16, 16})), quick());
  ASSERT_EQ(p.layers.size(), model.layers.size());
  // After the first down-sampling, skip0 [2, 8, 16, 16] (enc0's output, stashed) travels with
  // the pooled main tensor [2, 8, 8, 8]: both cross a cut there.
  const LayerProfile& down0 = p.layers.at(2);
  ASSERT_EQ(down0.name, "down0");
  EXPECT_EQ(down0.output_bytes, (2 * 8 * 16 * 16 + 2 * 8 * 8 * 8) * kFloat);
  // down0 only carries skip0 on. Its input is enc0's output given twice, as the main tensor and
  // as skip0 (one storage, input_bytes), whose gradients are two tensors.
  EXPECT_EQ(down0.carried_bytes, 2 * 8 * 16 * 16 * kFloat);
  EXPECT_EQ(down0.input_bytes, 2 * 8 * 16 * 16 * kFloat);
  EXPECT_EQ(down0.input_grad_bytes, 2 * down0.input_bytes);
  // enc1 carries skip0 too and stashes its own output, which it made: not carried.
  EXPECT_EQ(p.layers.at(3).carried_bytes, 2 * 8 * 16 * 16 * kFloat);
  EXPECT_EQ(p.layers.at(0).carried_bytes, 0);  // nothing stashed yet
  EXPECT_EQ(p.layers.back().carried_bytes, 0);
  for (const LayerProfile& layer : p.layers) {
    EXPECT_GT(layer.forward_ms, 0.0) << layer.name;
    EXPECT_GT(layer.backward_ms, 0.0) << layer.name;
  }
  // The head's output is the model output [2, 1, 16, 16], with no skip left.
  EXPECT_EQ(p.layers.back().output_bytes, 2 * 1 * 16 * 16 * kFloat);
}

TEST(Profiler, TorchScriptModelProfiles) {
  models::Model model =
      models::build_model(std::string(PIPEBAL_FIXTURES_DIR) + "/sequential_cnn_traced.pt");
  ProfileOptions options = quick();
  options.dtype = torch::kDouble;
  const Profile p = profile_model(model.layers, Batch(torch::randn({2, 3, 8, 8})), options);
  ASSERT_EQ(p.layers.size(), model.layers.size());
  EXPECT_EQ(p.dtype, "float64");
  for (const LayerProfile& layer : p.layers) EXPECT_GT(layer.forward_ms, 0.0) << layer.name;
  EXPECT_GT(p.layers[0].param_bytes, 0);
  EXPECT_EQ(p.layers[0].param_bytes % 8, 0);  // float64 parameters
}

TEST(Profiler, ShapeErrorNamesTheLayer) {
  models::Model model = models::build_model("mlp:layers=2,width=8", /*seed=*/0);
  try {
    profile_model(model.layers, Batch(torch::randn({4, 9})), quick());
    FAIL() << "no exception";
  } catch (const std::invalid_argument& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("layer 0"), std::string::npos) << what;
    EXPECT_NE(what.find("'fc0'"), std::string::npos) << what;
    EXPECT_NE(what.find("[4, 9]"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

// In-place layers get a leaf that requires grad as their input: profiled on a copy, not refused.
TEST(Profiler, InPlaceLayersProfile) {
  LayerSeq seq("in-place");
  seq.add(pipeline::make_layer("fc", "Linear", nn::Linear(8, 8)));
  seq.add(pipeline::make_layer("relu", "ReLU", nn::ReLU(nn::ReLUOptions().inplace(true))));
  seq.add(pipeline::make_layer("head", "Linear", nn::Linear(8, 2)));
  const Profile p = profile_model(seq, Batch(torch::randn({4, 8})), quick());
  ASSERT_EQ(p.layers.size(), 3u);
  EXPECT_EQ(p.layers[1].output_bytes, 4 * 8 * kFloat);
  EXPECT_EQ(p.layers[1].forward_samples_ms.size(), 3u);
}

// Doubles its input in place, counting the calls (on any thread) whose input was not the sample.
at::Tensor expected_input;
std::atomic<int> changed_inputs{0};
struct DoubleInPlaceImpl : nn::Cloneable<DoubleInPlaceImpl> {
  void reset() override {}
  at::Tensor forward(const at::Tensor& x) {
    if (!torch::equal(x, expected_input)) ++changed_inputs;
    return x.mul_(2);
  }
};
TORCH_MODULE(DoubleInPlace);

// A first layer that writes the model's input (which needs no gradient, so autograd lets it) is
// run on copies: every pass, and every co-runner's, starts from the sample's own values.
TEST(Profiler, AFirstLayerWritingItsInputSeesTheSampleEveryPass) {
  LayerSeq seq("writes-input");
  seq.add(pipeline::make_layer("double", "DoubleInPlace", DoubleInPlace()));
  seq.add(pipeline::make_layer("fc", "Linear", nn::Linear(8, 2)));
  const at::Tensor x = torch::randn({4, 8});
  expected_input = x.clone();
  changed_inputs = 0;
  ProfileOptions options = quick();
  options.co_runners = 1;
  const Profile p = profile_model(seq, Batch(x), options);
  ASSERT_EQ(p.layers.size(), 2u);
  EXPECT_EQ(changed_inputs.load(), 0);
  EXPECT_TRUE(torch::equal(x, expected_input));
}

// Throws on every forward, counting the calls.
std::atomic<int> thrower_calls{0};
struct ThrowerImpl : nn::Cloneable<ThrowerImpl> {
  void reset() override {}
  at::Tensor forward(const at::Tensor&) {
    ++thrower_calls;
    throw std::runtime_error("thrower failed");
  }
};
TORCH_MODULE(Thrower);

// On the test's own thread, passes its input on only once a Thrower has been called: profiled
// first, it lets a co-runner (another thread) reach the Thrower and fail before the profiler
// pauses the co-runners.
std::thread::id profiling_thread;
struct AwaitThrowerImpl : nn::Cloneable<AwaitThrowerImpl> {
  void reset() override {}
  at::Tensor forward(const at::Tensor& x) {
    while (std::this_thread::get_id() == profiling_thread && thrower_calls.load() == 0) {
      std::this_thread::yield();
    }
    return x * 1.0;
  }
};
TORCH_MODULE(AwaitThrower);

// A co-runner that fails ends; pausing the others for a memory measurement must not wait for
// it (this hung before), and the profiled layer reports the failure.
TEST(Profiler, FailingCoRunnerNeitherHangsNorHidesTheError) {
  LayerSeq seq("throws");
  seq.add(pipeline::make_layer("await", "AwaitThrower", AwaitThrower()));
  seq.add(pipeline::make_layer("bad", "Thrower", Thrower()));
  ProfileOptions options = quick();
  options.co_runners = 1;
  profiling_thread = std::this_thread::get_id();
  try {
    profile_model(seq, Batch(torch::randn({2, 8})), options);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("layer 1 ('bad', Thrower)"), std::string::npos)
        << error.what();
    EXPECT_NE(std::string(error.what()).find("thrower failed"), std::string::npos);
  }
}

// On a co-runner's thread, records the CPUs it may run on; on the profiling thread, waits until
// a co-runner has.
std::mutex co_runner_mutex;
std::vector<int> co_runner_cpus_seen;
struct RecordCpusImpl : nn::Cloneable<RecordCpusImpl> {
  void reset() override {}
  at::Tensor forward(const at::Tensor& x) {
    if (std::this_thread::get_id() != profiling_thread) {
      std::lock_guard<std::mutex> lock(co_runner_mutex);
      co_runner_cpus_seen = pipebal::this_thread_cpus();
    } else {  // at most a minute: a co-runner that never runs fails the test, not hangs it
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
      while (std::chrono::steady_clock::now() < deadline) {
        {
          std::lock_guard<std::mutex> lock(co_runner_mutex);
          if (!co_runner_cpus_seen.empty()) break;
        }
        std::this_thread::yield();
      }
    }
    return x * 1.0;
  }
};
TORCH_MODULE(RecordCpus);

// A co-runner stands in for another stage: it runs pinned where that stage will
// (ProfileOptions::device_cpus).
TEST(Profiler, CoRunnersRunOnTheCpusGivenThem) {
  LayerSeq seq("records");
  seq.add(pipeline::make_layer("record", "RecordCpus", RecordCpus()));
  const std::vector<int> cpus = pipebal::allowed_cpus();
  ProfileOptions options = quick();
  options.co_runners = 1;
  options.device_cpus = {{cpus.front()}, {cpus.back()}};  // the co-runner on the second
  profiling_thread = std::this_thread::get_id();
  co_runner_cpus_seen.clear();
  profile_model(seq, Batch(torch::randn({2, 8})), options);
  std::lock_guard<std::mutex> lock(co_runner_mutex);
  EXPECT_EQ(co_runner_cpus_seen, std::vector<int>{cpus.back()});
}

TEST(Profiler, BadOptionsAndMissingDevicesAreClearErrors) {
  LayerSeq seq("one");
  seq.add(pipeline::make_layer("fc", "Linear", nn::Linear(8, 8)));
  const Batch batch(torch::randn({2, 8}));
  ProfileOptions options = quick();
  options.repeat = 0;
  EXPECT_THROW(profile_model(seq, batch, options), std::invalid_argument);
  options = quick();
  options.backend = TimerBackend::kEvents;
  try {
    profile_model(seq, batch, options);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("CUDA"), std::string::npos) << error.what();
  }
  EXPECT_THROW(profile_model(LayerSeq("empty"), batch, quick()), std::invalid_argument);
}

TEST(Profiler, ProfilesOnTheGpu_CUDA) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  models::Model model = models::build_model("mlp:layers=2,width=64", /*seed=*/0);
  for (const TimerBackend backend :
       {TimerBackend::kAuto, TimerBackend::kWallclock, TimerBackend::kEvents}) {
    ProfileOptions options = quick();
    options.device = c10::Device(c10::kCUDA, 0);
    options.backend = backend;
    const Profile p = profile_model(model.layers, Batch(torch::randn({16, 64})), options);
    EXPECT_TRUE(p.environment.gpu_name.has_value());
    EXPECT_EQ(p.layers[1].activation_bytes, 16 * 64 * kFloat) << p.backend;
    for (const LayerProfile& layer : p.layers) EXPECT_GT(layer.forward_ms, 0.0) << p.backend;
  }
}

}  // namespace
}  // namespace pipebal::profiler
