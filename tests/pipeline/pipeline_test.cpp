// The engine beyond the float64 matrix (transparency_test.cpp): CUDA streams, deferred batch
// norm, step timeouts; failures surface as one error naming their action and never hang.
// Layers that write their input in place: in_place_test.cpp.
#include "pipebal/pipeline/pipeline.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "pipebal/common/cores.h"
#include "pipebal/pipeline/batch_norm.h"
#include "pipebal/pipeline/module_layer.h"
#include "tests/support/skip_model.h"

namespace pipebal::pipeline {
namespace {

namespace nn = torch::nn;
using testing::kWidth;
using testing::make_model;
using testing::mse;
using testing::plain_step;
using testing::Reference;

// Stages on CUDA streams: all on one GPU, and with a CPU stage between two GPU stages so that
// activations and gradients cross stream and device boundaries both ways. Runs where LibTorch
// sees a CUDA device (tools/gpu-check.sh); skipped elsewhere.
TEST(Pipeline, TransparentOnCudaStreams_CUDA) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const c10::Device cuda("cuda:0"), cpu("cpu");
  torch::manual_seed(42);
  Batch input(
      {torch::randn({7, kWidth}, torch::kDouble), torch::randn({7, kWidth}, torch::kDouble)});
  const at::Tensor target = torch::randn({7, 3}, torch::kDouble);
  LayerSeq plain = make_model(1);
  const Reference ref = plain_step(plain, input, target);
  at::Tensor expected_output;
  {
    torch::NoGradGuard no_grad;
    expected_output = plain.forward(input).value();
  }
  for (const auto& devices : {std::vector<c10::Device>{cuda, cuda, cuda}, {cuda, cpu, cuda}}) {
    for (auto schedule :
         {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kZeroBubbleH1}) {
      SCOPED_TRACE(std::string(to_string(schedule)) +
                   (devices[1].is_cpu() ? ", cuda,cpu,cuda" : ", cuda x3"));
      LayerSeq piped = make_model(1);
      PipelineOptions options;
      options.chunks = 3;
      options.schedule = schedule;
      Pipeline pipeline(piped, {3, 3, 2}, devices, options);
      const StepResult result = pipeline.step(input, target, mse);
      EXPECT_NEAR(result.loss, ref.loss, 1e-9 * std::abs(ref.loss));
      const auto params = piped.parameters();
      ASSERT_EQ(params.size(), ref.grads.size());
      EXPECT_TRUE(params.front().is_cuda());
      for (size_t i = 0; i < params.size(); ++i) {
        EXPECT_TRUE(torch::allclose(params[i].grad().cpu(), ref.grads[i], 1e-9, 1e-11)) << i;
      }
      const at::Tensor output = pipeline.forward(input).value();
      EXPECT_TRUE(output.is_cuda());
      EXPECT_TRUE(torch::allclose(output.cpu(), expected_output, 1e-9, 1e-11));
    }
  }
}

// Four stages on one GPU with enough work per micro-batch that their streams really overlap:
// every step's gradients still equal the plain model's on the same GPU. A missing wait between
// streams, or memory reused while another stream reads it, shows up as wrong gradients.
TEST(Pipeline, OverlappingCudaStreamsKeepGradientsExact_CUDA) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const c10::Device cuda("cuda:0");
  auto make = [&] {
    torch::manual_seed(21);
    LayerSeq seq("mlp");
    for (int l = 0; l < 4; ++l) {
      seq.add(make_layer("fc" + std::to_string(l), "Linear", nn::Linear(2048, 2048)));
      seq.add(make_layer("relu" + std::to_string(l), "ReLU", nn::ReLU()));
    }
    seq.add(make_layer("head", "Linear", nn::Linear(2048, 16)));
    seq.to(cuda);
    return seq;
  };
  LayerSeq plain = make(), piped = make();
  PipelineOptions options;
  options.chunks = 8;
  options.schedule = ScheduleKind::kOneFOneB;
  options.checkpoint = CheckpointMode::kExceptLast;
  Pipeline pipeline(piped, {3, 2, 2, 2}, {cuda}, options);
  for (int step = 0; step < 3; ++step) {
    torch::manual_seed(100 + step);
    Batch input(torch::randn({1024, 2048}));
    const at::Tensor target = torch::randn({1024, 16});
    for (auto& p : plain.parameters()) p.mutable_grad() = at::Tensor();
    for (auto& p : piped.parameters()) p.mutable_grad() = at::Tensor();
    const Reference ref = plain_step(plain, Batch(input.value().to(cuda)), target.to(cuda));
    const StepResult result = pipeline.step(input, target, mse);
    EXPECT_NEAR(result.loss, ref.loss, 1e-5 * std::abs(ref.loss)) << "step " << step;
    const auto params = piped.parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      const double scale = ref.grads[i].abs().max().item<double>();
      const double diff = (params[i].grad() - ref.grads[i]).abs().max().item<double>();
      EXPECT_LE(diff, 1e-4 * scale) << "step " << step << ", parameter " << i;
    }
  }
}

// Something to wait on forever, as a layer that never returns does.
struct Forever {
  std::mutex mutex;
  std::condition_variable never_notified;
  void wait() {
    std::unique_lock<std::mutex> lock(mutex);
    never_notified.wait(lock, [] { return false; });
  }
};

struct BlockImpl : nn::Cloneable<BlockImpl> {
  explicit BlockImpl(Forever* forever) : forever_(forever) {}
  void reset() override {}
  at::Tensor forward(const at::Tensor& x) {
    forever_->wait();
    return x * 1.0;
  }
  Forever* forever_;
};
TORCH_MODULE(Block);

TEST(Pipeline, StepTimeoutNamesTheStageAndActionStillRunning) {
  // Never destroyed: the stuck stage stays blocked on it until the process exits.
  static Forever& forever = *new Forever;
  LayerSeq seq("hangs");
  seq.add(make_layer("fc", "Linear", nn::Linear(kWidth, kWidth)));
  seq.add(make_layer("block", "Block", Block(&forever)));
  seq.add(make_layer("head", "Linear", nn::Linear(kWidth, 3)));
  // In training mode the stuck stage would be inside its first run's probe of the generator,
  // holding a share of the lock that later tests in this process (run as one) would wait for.
  seq.train(false);
  PipelineOptions options;
  options.chunks = 2;
  options.step_timeout_s = 0.2;
  auto pipeline = std::make_unique<Pipeline>(seq, std::vector<int>{1, 1, 1},
                                             std::vector<c10::Device>{}, options);
  try {
    pipeline->step(Batch(torch::randn({4, kWidth})), torch::randn({4, 3}), mse);
    FAIL() << "no timeout";
  } catch (const StepTimeout& error) {
    // Other stages are listed only if a loaded machine keeps them computing that long.
    EXPECT_NE(std::string(error.what()).find("stage 1 (forward of micro-batch 0)"),
              std::string::npos)
        << error.what();
  }
  EXPECT_THROW(pipeline->step(Batch(torch::randn({4, kWidth})), torch::randn({4, 3}), mse),
               std::logic_error);
  pipeline.reset();  // leaves the stuck stage's state alive, and returns
}

TEST(Pipeline, ForwardEqualsPlainModelOutput) {
  LayerSeq plain = make_model(2), piped = make_model(2);
  Batch input(
      {torch::randn({9, kWidth}, torch::kDouble), torch::randn({9, kWidth}, torch::kDouble)});
  const at::Tensor expected = plain.forward(input).value();
  PipelineOptions options;
  options.chunks = 4;
  for (const int virtual_stages : {1, 2}) {
    SCOPED_TRACE(virtual_stages);
    // Interleaved, a device's thread runs its stages' forwards in wavefront order.
    options.schedule = virtual_stages > 1 ? ScheduleKind::kInterleaved : ScheduleKind::kGPipe;
    options.virtual_stages = virtual_stages;
    const std::vector<int> balance =
        virtual_stages > 1 ? std::vector<int>{1, 3, 2, 2} : std::vector<int>{2, 4, 2};
    Pipeline pipeline(piped, balance, {}, options);
    const at::Tensor out = pipeline.forward(input).value();
    EXPECT_TRUE(torch::allclose(out, expected, 1e-12, 1e-12));
    EXPECT_FALSE(out.requires_grad());
  }
}

// Normalisation itself uses micro-batch statistics (as in GPipe), so only a BatchNorm whose
// input does not depend on an earlier BatchNorm sees the same data as in the plain model.
TEST(Pipeline, DeferredBatchNormUpdatesRunningStatsLikeThePlainModel) {
  auto make = [] {
    torch::manual_seed(4);
    LayerSeq seq("bn");
    seq.add(make_layer("fc", "Linear", nn::Linear(5, 4)));
    seq.add(make_layer("bn", "BatchNorm", BatchNorm(4)));
    seq.add(make_layer("fc2", "Linear", nn::Linear(4, 4)));
    seq.add(make_layer("act", "Tanh", nn::Tanh()));
    seq.to(torch::kDouble);
    return seq;
  };
  Batch input(torch::randn({11, 5}, torch::kDouble) * 3 + 1);
  const at::Tensor target = torch::randn({11, 4}, torch::kDouble);
  LayerSeq plain = make(), piped = make();
  plain_step(plain, input, target);
  PipelineOptions options;
  options.chunks = 3;
  options.deferred_batch_norm = true;
  Pipeline pipeline(piped, {2, 2}, {}, options);
  pipeline.step(input, target, mse);
  const auto expected = plain.buffers(), actual = piped.buffers();
  ASSERT_EQ(expected.size(), actual.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_TRUE(torch::allclose(actual[i], expected[i], 1e-10, 1e-12)) << "buffer " << i;
  }
  // Without deferral the running statistics move once per micro-batch and differ.
  LayerSeq eager = make();
  options.deferred_batch_norm = false;
  options.checkpoint = CheckpointMode::kNever;
  Pipeline eager_pipeline(eager, {2, 2}, {}, options);
  eager_pipeline.step(input, target, mse);
  EXPECT_FALSE(torch::allclose(eager.buffers()[0], expected[0], 1e-6, 1e-8));
  // Once per micro-batch, however checkpointed: a recomputation does not move them again.
  for (auto checkpoint : {CheckpointMode::kAlways, CheckpointMode::kExceptLast}) {
    LayerSeq checkpointed = make();
    options.checkpoint = checkpoint;
    Pipeline checkpointed_pipeline(checkpointed, {2, 2}, {}, options);
    checkpointed_pipeline.step(input, target, mse);
    const auto once = eager.buffers(), got = checkpointed.buffers();
    for (size_t i = 0; i < once.size(); ++i) {
      EXPECT_TRUE(torch::equal(got[i], once[i])) << "buffer " << i << ", " << to_string(checkpoint);
    }
  }
}

// Deferral needs pipebal's BatchNorm, which holds the sums: another is refused, not left alone.
TEST(Pipeline, DeferredBatchNormRefusesABatchNormItCannotDefer) {
  LayerSeq seq("torch-bn");
  seq.add(make_layer("fc", "Linear", nn::Linear(5, 4)));
  seq.add(make_layer("bn", "BatchNorm1d", nn::BatchNorm1d(4)));
  PipelineOptions options;
  options.deferred_batch_norm = true;
  try {
    Pipeline pipeline(seq, {1, 1}, {}, options);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(
        std::string(error.what()).find("layer 1 ('bn', BatchNorm1d) holds a batch norm other"),
        std::string::npos)
        << error.what();
  }
  options.deferred_batch_norm = false;
  EXPECT_NO_THROW(Pipeline(seq, {1, 1}, {}, options));
}

// A worker whose start fails fails the pipeline's construction: in a step, its neighbours would
// wait for it.
TEST(Pipeline, AWorkerStartThatThrowsFailsTheConstruction) {
  LayerSeq seq = make_model(2);
  PipelineOptions options;
  options.on_stage_enter = [](int stage) {
    if (stage == 1) throw std::runtime_error("start failed");
  };
  EXPECT_THROW(Pipeline(seq, {4, 4}, {}, options), std::runtime_error);
}

// stage_cpus pins each stage's worker before it starts (the kernel's view of its affinity, read
// on the worker), and one list per stage is required.
TEST(Pipeline, EachStagesWorkerRunsOnTheCpusGivenIt) {
  LayerSeq seq = make_model(2);
  const std::vector<int> cpus = pipebal::allowed_cpus();
  ASSERT_FALSE(cpus.empty());
  PipelineOptions options;
  options.stage_cpus = {{cpus.back()}, {cpus.front()}};
  std::mutex mutex;
  std::map<int, std::vector<int>> seen;
  options.on_stage_enter = [&](int stage) {
    std::lock_guard<std::mutex> lock(mutex);
    seen[stage] = pipebal::this_thread_cpus();
  };
  Pipeline pipeline(seq, {4, 4}, {}, options);
  EXPECT_EQ(seen[0], std::vector<int>{cpus.back()});
  EXPECT_EQ(seen[1], std::vector<int>{cpus.front()});
  options.stage_cpus = {{cpus.front()}};
  EXPECT_THROW(Pipeline(seq, {4, 4}, {}, options), std::invalid_argument);
}

// Throws on the chosen stage when armed.
struct FailingImpl : nn::Cloneable<FailingImpl> {
  void reset() override {}
  at::Tensor forward(const at::Tensor& x) {
    if (armed) throw std::runtime_error("injected failure");
    return x;
  }
  bool armed = false;
};
TORCH_MODULE(Failing);

// Fails in the action it is armed for: a recompute (its forward with autograd on, under
// checkpointing) or its backward.
struct ThrowInBackward : torch::autograd::Function<ThrowInBackward> {
  static at::Tensor forward(torch::autograd::AutogradContext*, const at::Tensor& x) {
    return x.clone();
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                 const torch::autograd::variable_list&) {
    throw std::runtime_error("injected backward failure");
  }
};
struct FailingLaterImpl : nn::Cloneable<FailingLaterImpl> {
  void reset() override {}
  at::Tensor forward(const at::Tensor& x) {
    if (in_recompute && torch::GradMode::is_enabled()) {
      throw std::runtime_error("injected recompute failure");
    }
    return in_backward ? ThrowInBackward::apply(x) : x;
  }
  bool in_recompute = false;
  bool in_backward = false;
};
TORCH_MODULE(FailingLater);

// Scales by a parameter whose gradient fails when armed: only W (zb-h1) computes it.
struct FailingWeightImpl : nn::Cloneable<FailingWeightImpl> {
  FailingWeightImpl() { reset(); }
  void reset() override { scale = register_parameter("scale", torch::ones({4})); }
  at::Tensor forward(const at::Tensor& x) {
    return x * (armed ? ThrowInBackward::apply(scale) : scale);
  }
  at::Tensor scale;
  bool armed = false;
};
TORCH_MODULE(FailingWeight);

TEST(Pipeline, AFailureInWNamesItAndLeavesThePipelineUsable) {
  torch::manual_seed(1);
  LayerSeq seq("fail-in-w");
  seq.add(make_layer("fc0", "Linear", nn::Linear(4, 4)));
  seq.add(make_layer("fc1", "Linear", nn::Linear(4, 4)));
  FailingWeight probe;
  seq.add(make_layer("probe", "FailingWeight", probe));
  seq.add(make_layer("fc2", "Linear", nn::Linear(4, 4)));
  PipelineOptions options;
  options.chunks = 4;
  options.schedule = ScheduleKind::kZeroBubbleH1;
  Pipeline pipeline(seq, {2, 2}, {}, options);
  const Batch input(torch::randn({8, 4}));
  const at::Tensor target = torch::randn({8, 4});
  probe->armed = true;
  try {
    pipeline.step(input, target, mse);
    FAIL() << "expected the injected failure";
  } catch (const std::runtime_error& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("stage 1, weight gradients of micro-batch 0"), std::string::npos) << what;
    EXPECT_NE(what.find("injected backward failure"), std::string::npos) << what;
  }
  probe->armed = false;
  EXPECT_NO_THROW(pipeline.step(input, target, mse));
}

TEST(Pipeline, FailuresInRecomputeBackwardAndLossNameTheirActionAndLeaveThePipelineUsable) {
  torch::manual_seed(1);
  LayerSeq seq("fail-later");
  seq.add(make_layer("fc0", "Linear", nn::Linear(4, 4)));
  seq.add(make_layer("fc1", "Linear", nn::Linear(4, 4)));
  FailingLater probe;
  seq.add(make_layer("probe", "FailingLater", probe));
  seq.add(make_layer("fc2", "Linear", nn::Linear(4, 4)));
  PipelineOptions options;
  options.chunks = 4;
  options.checkpoint = CheckpointMode::kAlways;  // every micro-batch recomputes
  Pipeline pipeline(seq, {2, 2}, {}, options);
  const Batch input(torch::randn({8, 4}));
  const at::Tensor target = torch::randn({8, 4});
  auto error_of = [&](const LossFn& loss) {
    try {
      pipeline.step(input, target, loss);
    } catch (const std::runtime_error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };

  probe->in_recompute = true;
  std::string what = error_of(mse);
  EXPECT_NE(what.find("stage 1, layer 2 ('probe', FailingLater), recompute of micro-batch"),
            std::string::npos)
      << what;
  EXPECT_NE(what.find("injected recompute failure"), std::string::npos) << what;
  probe->in_recompute = false;
  EXPECT_NO_THROW(pipeline.step(input, target, mse));

  probe->in_backward = true;
  what = error_of(mse);
  EXPECT_NE(what.find("stage 1, backward of micro-batch"), std::string::npos) << what;
  EXPECT_NE(what.find("injected backward failure"), std::string::npos) << what;
  probe->in_backward = false;
  EXPECT_NO_THROW(pipeline.step(input, target, mse));

  what = error_of([](const at::Tensor&, const at::Tensor&) -> at::Tensor {
    throw std::runtime_error("injected loss failure");
  });
  EXPECT_NE(what.find("stage 1, loss of micro-batch"), std::string::npos) << what;
  EXPECT_NE(what.find("injected loss failure"), std::string::npos) << what;
  EXPECT_NO_THROW(pipeline.step(input, target, mse));

  // A loss that is not one value (reduction 'none') is named as such, not as LibTorch's failed
  // conversion to a number.
  what = error_of([](const at::Tensor& out, const at::Tensor& t) {
    return torch::mse_loss(out, t, at::Reduction::None);
  });
  EXPECT_NE(what.find("stage 1, loss of micro-batch "), std::string::npos) << what;
  EXPECT_NE(what.find(": the loss function returned 8 values (shape [2, 4]), not one"),
            std::string::npos)
      << what;
  EXPECT_NO_THROW(pipeline.step(input, target, mse));
}

// Inference names the micro-batch a layer failed on.
TEST(Pipeline, AFailureInForwardNamesItsMicroBatch) {
  LayerSeq seq("fail-on-large");
  seq.add(make_layer("fc0", "Linear", nn::Linear(4, 4)));
  seq.add(make_layer("check", "Functional", nn::Functional([](const at::Tensor& x) {
                       if (x.abs().max().item<double>() > 1e6)
                         throw std::runtime_error("too large");
                       return x;
                     })));
  Pipeline pipeline(seq, {1, 1}, {}, PipelineOptions{});
  at::Tensor input = torch::zeros({8, 4});
  input[5][0] = 1e9;  // micro-batch 2 of 4
  try {
    pipeline.forward(Batch(input));
    FAIL() << "expected the layer's failure";
  } catch (const std::runtime_error& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("stage 1, layer 1 ('check', Functional), forward of micro-batch 2: too "
                        "large"),
              std::string::npos)
        << what;
  }
}

TEST(Pipeline, FailureInAnyStageIsOneErrorAndThePipelineStaysUsable) {
  for (auto schedule :
       {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kZeroBubbleH1}) {
    for (int failing_stage = 0; failing_stage < 3; ++failing_stage) {
      torch::manual_seed(1);
      LayerSeq seq("fail");
      std::vector<Failing> probes;
      for (int s = 0; s < 3; ++s) {
        seq.add(make_layer("fc" + std::to_string(s), "Linear", nn::Linear(4, 4)));
        probes.emplace_back();
        seq.add(make_layer("probe" + std::to_string(s), "Failing", probes.back()));
      }
      PipelineOptions options;
      options.chunks = 4;
      options.schedule = schedule;
      Pipeline pipeline(seq, {2, 2, 2}, {}, options);
      Batch input(torch::randn({8, 4}));
      const at::Tensor target = torch::randn({8, 4});
      probes[failing_stage]->armed = true;
      try {
        pipeline.step(input, target, mse);
        FAIL() << "expected the injected failure";
      } catch (const std::runtime_error& error) {
        const std::string what = error.what();
        EXPECT_NE(what.find("stage " + std::to_string(failing_stage)), std::string::npos) << what;
        EXPECT_NE(what.find("'probe" + std::to_string(failing_stage) + "'"), std::string::npos)
            << what;
        EXPECT_NE(what.find("micro-batch 0"), std::string::npos) << what;
        EXPECT_NE(what.find("injected failure"), std::string::npos) << what;
      }
      probes[failing_stage]->armed = false;
      EXPECT_NO_THROW(pipeline.step(input, target, mse));
    }
  }
}

TEST(Pipeline, NonFiniteLossFailsWhenChecked) {
  LayerSeq seq("nan");
  seq.add(make_layer("fc", "Linear", nn::Linear(2, 2)));
  seq.add(make_layer("log", "Log",
                     nn::Functional([](const at::Tensor& x) { return torch::log(x - 100); })));
  PipelineOptions options;
  options.chunks = 2;
  options.check_finite = true;
  Pipeline pipeline(seq, {1, 1}, {}, options);
  try {
    pipeline.step(Batch(torch::randn({4, 2})), torch::randn({4, 2}), mse);
    FAIL();
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("non-finite loss"), std::string::npos);
  }
}

TEST(Pipeline, RejectsBadBalanceAndDevices) {
  LayerSeq seq = make_model(0);
  auto expect_error = [&](std::vector<int> balance, const std::string& fragment) {
    try {
      Pipeline(seq, balance, {}, PipelineOptions{});
      FAIL() << fragment;
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
    }
  };
  expect_error({3, 3}, "sums to 6, but the model has 8 layers");
  expect_error({4, 0, 4}, "stage 1 has 0 layers");
  expect_error({}, "balance is empty");
  EXPECT_THROW(Pipeline(seq, {4, 4}, {c10::Device("cpu"), c10::Device("cpu"), c10::Device("cpu")},
                        PipelineOptions{}),
               std::invalid_argument);
  Pipeline pipeline(seq, {4, 4}, {}, PipelineOptions{});
  EXPECT_THROW(pipeline.step(Batch(torch::randn({2, kWidth}, torch::kDouble)),
                             torch::randn({2, 3}, torch::kDouble), mse),
               std::invalid_argument);  // 4 chunks, 2 samples
}

// A job for a stage runs on the thread that runs the stage's actions, with its intra-op thread
// count; what it throws comes back to the caller.
TEST(Pipeline, RunsAJobOnTheThreadOfAStage) {
  std::mutex mutex;
  std::thread::id forward_thread;
  LayerSeq seq("threads");
  seq.add(make_layer("fc0", "Linear", nn::Linear(2, 2)));
  seq.add(make_layer("seen", "Identity", nn::Functional([&](const at::Tensor& x) {
                       std::lock_guard<std::mutex> lock(mutex);
                       forward_thread = std::this_thread::get_id();
                       return x;
                     })));
  PipelineOptions options;
  options.chunks = 2;
  options.threads_per_stage = 2;
  const int callers = at::get_num_threads();
  at::set_num_threads(1);  // the caller's count differs from the stages'
  Pipeline pipeline(seq, {1, 1}, {}, options);
  pipeline.step(Batch(torch::randn({4, 2})), torch::randn({4, 2}), mse);
  std::thread::id job_thread[2];
  int job_threads[2] = {0, 0};
  for (int s = 0; s < 2; ++s) {
    pipeline.run_on_stage_thread(s, [&, s] {
      job_thread[s] = std::this_thread::get_id();
      job_threads[s] = at::get_num_threads();
    });
    EXPECT_EQ(job_threads[s], 2) << s;
    EXPECT_NE(job_thread[s], std::this_thread::get_id()) << s;
  }
  EXPECT_NE(job_thread[0], job_thread[1]);
  EXPECT_EQ(job_thread[1], forward_thread);
  EXPECT_THROW(pipeline.run_on_stage_thread(0, [] { throw std::runtime_error("job failed"); }),
               std::runtime_error);
  EXPECT_THROW(pipeline.run_on_stage_thread(2, [] {}), std::invalid_argument);
  pipeline.step(Batch(torch::randn({4, 2})), torch::randn({4, 2}), mse);  // still usable
  at::set_num_threads(callers);
}

TEST(Pipeline, LossFollowsThePlainModelStepForStep) {
  LayerSeq plain = make_model(6), piped = make_model(6);
  Batch input(
      {torch::randn({12, kWidth}, torch::kDouble), torch::randn({12, kWidth}, torch::kDouble)});
  const at::Tensor target = torch::randn({12, 3}, torch::kDouble);
  torch::optim::SGD plain_opt(plain.parameters(), 0.1), piped_opt(piped.parameters(), 0.1);
  PipelineOptions options;
  options.chunks = 3;
  options.schedule = ScheduleKind::kOneFOneB;
  Pipeline pipeline(piped, {3, 5}, {}, options);
  double first = 0, last = 0;
  for (int step = 0; step < 10; ++step) {
    plain_opt.zero_grad();
    const double ref = plain_step(plain, input, target).loss;
    plain_opt.step();
    piped_opt.zero_grad();
    const double loss = pipeline.step(input, target, mse).loss;
    piped_opt.step();
    EXPECT_NEAR(loss, ref, 1e-9 * std::abs(ref)) << "step " << step;
    if (step == 0) first = loss;
    last = loss;
  }
  EXPECT_LT(last, 0.8 * first);
}

}  // namespace
}  // namespace pipebal::pipeline
