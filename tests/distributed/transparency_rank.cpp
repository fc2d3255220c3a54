// One rank of a multi-process pipeline test, started by `pipebal launch` or by the test itself
// with torchrun's environment. Each rank trains the same float64 model (skip tensor, two inputs,
// a dropped tensor; or one with batch norm) three ways for a few SGD steps: plainly, through a
// pipeline of threads in this process, and through the c10d pipeline in which it runs stage
// RANK. Every step's loss and its own stage's gradients must equal the threaded pipeline's and
// the plain model's to 1e-10; with deferred batch norm, whose micro-batch statistics differ from
// the whole batch's by design, gradients and running statistics must equal the threaded
// pipeline's (whose statistics tests/pipeline checks against the plain model); with replicas too,
// their statistics summed before each commit. Exit 0 when they do,
// 1 when not, 2 when the run failed (one line on stderr, as the CLI). With --device cuda the
// c10d pipeline's stages run on the GPU (every rank on cuda:LOCAL_RANK, or all on cuda:0 with
// --device cuda:0), the references on the CPU; on two devices float64 sums may be ordered
// differently, so the tolerance is 1e-9 there. A failure can be injected into one rank: a throw,
// a SIGKILL or a never-returning layer in its stage's first forward of step 1.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <torch/torch.h>

#include "pipebal/common/parse_integers.h"
#include "pipebal/distributed/c10d_transport.h"
#include "pipebal/distributed/group.h"
#include "pipebal/distributed/launch_env.h"
#include "pipebal/distributed/launcher.h"
#include "pipebal/distributed/peer_failure_notice.h"
#include "pipebal/distributed/replicas.h"
#include "pipebal/pipeline/batch_norm.h"
#include "pipebal/pipeline/error_text.h"
#include "pipebal/pipeline/pipeline.h"
#include "tests/support/skip_model.h"

namespace {

using namespace pipebal;
using pipeline::Batch;
using pipeline::LayerSeq;

std::atomic<bool> g_armed{false};
std::string g_failure;

// Passes its input through; when armed, fails the way the test asked.
struct InjectImpl : torch::nn::Cloneable<InjectImpl> {
  void reset() override {}
  at::Tensor forward(const at::Tensor& x) {
    if (g_armed) {
      if (g_failure == "throw") throw std::runtime_error("injected failure");
      if (g_failure == "kill") raise(SIGKILL);
      if (g_failure == "stop") raise(SIGSTOP);  // as a frozen process, or a host gone
      if (g_failure == "hang") {
        for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
      }
    }
    return x;
  }
};
TORCH_MODULE(Inject);

LayerSeq batch_norm_model() {
  namespace nn = torch::nn;
  torch::manual_seed(4);
  LayerSeq seq("bn");
  seq.add(pipeline::make_layer("fc", "Linear", nn::Linear(6, 4)));
  seq.add(pipeline::make_layer("bn", "BatchNorm", pipeline::BatchNorm(4)));
  seq.add(pipeline::make_layer("fc2", "Linear", nn::Linear(4, 4)));
  seq.add(pipeline::make_layer("bn2", "BatchNorm", pipeline::BatchNorm(4)));
  seq.add(pipeline::make_layer("head", "Linear", nn::Linear(4, 3)));
  seq.to(torch::kDouble);
  return seq;
}

// The model, with the injecting layer first in stage `fail_stage` (which grows by one layer).
LayerSeq build(bool batch_norm, std::vector<int>& balance, int fail_stage) {
  LayerSeq base = batch_norm ? batch_norm_model() : pipeline::testing::make_model(1);
  if (fail_stage < 0) return base;
  size_t at = 0;
  for (int s = 0; s < fail_stage; ++s) at += static_cast<size_t>(balance[s]);
  LayerSeq with(base.name());
  for (size_t l = 0; l < base.size(); ++l) {
    if (l == at) with.add(pipeline::make_layer("inject", "Inject", Inject()));
    with.add(base.at(l));
  }
  balance[fail_stage] += 1;
  return with;
}

std::vector<int> parse_list(const std::string& text) {
  const auto values = parse_integer_list(text);
  if (!values) throw std::invalid_argument("expected integers separated by commas: " + text);
  return {values->begin(), values->end()};
}

int run(int argc, char** argv) {
  std::string schedule = "gpipe", checkpoint = "never", balance_text = "4,4", device_text = "cpu";
  int chunks = 3, steps = 3, fail_rank = -1, replicas = 1, virtual_stages = 1;
  double timeout_s = 60;
  bool batch_norm = false, vary_samples = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return std::string(argv[++i]);
    };
    if (arg == "--schedule")
      schedule = value();
    else if (arg == "--checkpoint")
      checkpoint = value();
    else if (arg == "--balance")
      balance_text = value();
    else if (arg == "--chunks")
      chunks = std::stoi(value());
    else if (arg == "--steps")
      steps = std::stoi(value());
    else if (arg == "--batch-norm")
      batch_norm = true;
    else if (arg == "--vary-samples")
      vary_samples = true;
    else if (arg == "--replicas")
      replicas = std::stoi(value());
    else if (arg == "--virtual")
      virtual_stages = std::stoi(value());
    else if (arg == "--device")
      device_text = value();
    else if (arg == "--fail")
      g_failure = value();
    else if (arg == "--fail-rank")
      fail_rank = std::stoi(value());
    else if (arg == "--timeout")
      timeout_s = std::stod(value());
    else
      throw std::invalid_argument("unknown argument " + arg);
  }
  const auto env = distributed::launch_env_from_process();
  if (!env)
    throw std::invalid_argument("run me with torchrun's environment (WORLD_SIZE, RANK, ...)");
  const int rank = env->rank;
  const distributed::Placement placement = distributed::place(
      env->world_size, static_cast<int>(parse_list(balance_text).size()), replicas, virtual_stages);
  const int replica = placement.replica_of(rank);
  if (vary_samples && replicas > 1) throw std::invalid_argument("--vary-samples takes one replica");

  std::vector<int> balance = parse_list(balance_text);
  const int fail_stage = g_failure.empty() ? -1 : fail_rank;
  LayerSeq plain = build(batch_norm, balance, fail_stage);
  std::vector<int> same_balance = parse_list(balance_text);
  LayerSeq piped = build(batch_norm, same_balance, fail_stage);
  same_balance = parse_list(balance_text);
  LayerSeq threaded = build(batch_norm, same_balance, fail_stage);

  // The whole batch, which the plain model and the threaded pipeline train on; each replica of
  // the c10d pipeline trains on its slice of `samples`. With --vary-samples, step k trains on the
  // first kVaried[k % 3] samples: each micro-batch's messages grow, then shrink.
  torch::manual_seed(42);
  constexpr int64_t kVaried[] = {11, 14, 7};
  // Replicas with batch norm: each replica's micro-batches are the threaded pipeline's (with
  // `chunks` times the replicas), so that each normalises over the same samples.
  const bool even = batch_norm && replicas > 1;
  const int64_t samples = vary_samples ? 14 : even ? 4 * chunks : 11;
  const int64_t all = samples * replicas;
  Batch input = batch_norm
                    ? Batch(torch::randn({all, 6}, torch::kDouble) * 3 + 1)
                    : Batch({torch::randn({all, pipeline::testing::kWidth}, torch::kDouble),
                             torch::randn({all, pipeline::testing::kWidth}, torch::kDouble)});
  const at::Tensor target = torch::randn({all, 3}, torch::kDouble);
  Batch mine;
  for (const auto& t : input.tensors)
    mine.tensors.push_back(t.narrow(0, replica * samples, samples));
  const at::Tensor my_target = target.narrow(0, replica * samples, samples);

  auto group = std::make_shared<distributed::Group>(
      *env, std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  pipeline::PipelineOptions options;
  options.chunks = chunks;
  options.schedule = pipeline::parse_schedule_kind(schedule);
  options.checkpoint = pipeline::parse_checkpoint_mode(checkpoint);
  options.deferred_batch_norm = batch_norm;
  options.virtual_stages = virtual_stages;
  options.step_timeout_s = timeout_s;
  c10::Device device(device_text);
  if (device.is_cuda() && !device.has_index()) {
    device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(env->local_rank));
  }
  const double rtol = device.is_cpu() ? 1e-10 : 1e-9, atol = device.is_cpu() ? 1e-12 : 1e-11;
  distributed::GradientAverager averager(group, placement);
  pipeline::PipelineOptions replica_options = options;
  replica_options.sum_over_replicas = [&averager](at::Tensor& values) { averager.sum(values); };
  pipeline::Pipeline pipe(piped, balance, std::vector<c10::Device>(balance.size(), device),
                          replica_options, distributed::c10d_transport(group, placement, device));
  pipeline::PipelineOptions threaded_options = options;
  if (even) threaded_options.chunks = chunks * replicas;
  pipeline::Pipeline threads(threaded, balance, {}, threaded_options);

  // This rank's stages (with the interleaved schedule every `devices`-th, from its own).
  std::vector<at::Tensor> mine_plain, mine_piped, mine_threaded, mine_piped_buffers,
      mine_threaded_buffers;
  const auto append = [](std::vector<at::Tensor>& to, const std::vector<at::Tensor>& from) {
    to.insert(to.end(), from.begin(), from.end());
  };
  size_t first = 0;
  for (int s = 0; s < static_cast<int>(balance.size()); ++s) {
    if (placement.runs(s, rank)) {
      append(mine_plain, plain.slice(first, balance[s]).parameters());
      append(mine_piped, piped.slice(first, balance[s]).parameters());
      append(mine_threaded, threaded.slice(first, balance[s]).parameters());
      append(mine_piped_buffers, piped.slice(first, balance[s]).buffers());
      append(mine_threaded_buffers, threaded.slice(first, balance[s]).buffers());
    }
    first += static_cast<size_t>(balance[s]);
  }
  torch::optim::SGD plain_sgd(plain.parameters(), torch::optim::SGDOptions(0.05));
  torch::optim::SGD piped_sgd(piped.parameters(), torch::optim::SGDOptions(0.05));
  torch::optim::SGD threaded_sgd(threaded.parameters(), torch::optim::SGDOptions(0.05));

  int mismatches = 0;
  auto expect = [&](bool ok, const std::string& what) {
    if (ok) return;
    ++mismatches;
    std::cerr << fmt::format("rank {}: {}\n", rank, what);
  };
  auto expect_same_gradients = [&](const std::vector<at::Tensor>& expected, const std::string& name,
                                   int step) {
    const std::vector<at::Tensor>& params = mine_piped;
    expect(!params.empty() && params.size() == expected.size(), "no parameters to compare");
    for (size_t p = 0; p < params.size() && p < expected.size(); ++p) {
      expect(params[p].grad().defined() &&
                 torch::allclose(params[p].grad().cpu(), expected[p].grad(), rtol, atol),
             fmt::format("step {}: gradient of parameter {} of rank {} differs from the {}'s", step,
                         p, rank, name));
    }
  };
  for (int step = 0; step < steps; ++step) {
    plain_sgd.zero_grad();
    piped_sgd.zero_grad();
    threaded_sgd.zero_grad();
    const int64_t used = vary_samples ? kVaried[step % 3] : all;
    Batch step_input;
    for (const auto& t : input.tensors) step_input.tensors.push_back(t.narrow(0, 0, used));
    const at::Tensor step_target = target.narrow(0, 0, used);
    const auto plain_result = pipeline::testing::plain_step(plain, step_input, step_target);
    const auto threaded_result = threads.step(step_input, step_target, pipeline::testing::mse);
    g_armed = step == 1 && rank == fail_rank;
    const pipeline::StepResult result =
        vary_samples ? pipe.step(step_input, step_target, pipeline::testing::mse)
                     : pipe.step(mine, my_target, pipeline::testing::mse);
    g_armed = false;
    averager.average(mine_piped);
    auto expect_loss = [&](double expected, const std::string& name) {
      expect(std::abs(result.loss - expected) <= rtol * std::abs(expected),
             fmt::format("step {}: loss {} differs from the {}'s {}", step, result.loss, name,
                         expected));
    };
    expect_loss(threaded_result.loss, "threaded pipeline");
    expect_same_gradients(mine_threaded, "threaded pipeline", step);
    if (batch_norm) {
      const auto &buffers = mine_piped_buffers, &expected = mine_threaded_buffers;
      expect(!buffers.empty() && buffers.size() == expected.size(), "no buffers to compare");
      for (size_t b = 0; b < buffers.size() && b < expected.size(); ++b) {
        expect(torch::allclose(buffers[b].cpu(), expected[b], rtol, atol),
               fmt::format("step {}: buffer {} of rank {} differs from the threaded pipeline's",
                           step, b, rank));
      }
    } else {
      expect_loss(plain_result.loss, "plain model");
      expect_same_gradients(mine_plain, "plain model", step);
    }
    plain_sgd.step();
    piped_sgd.step();
    threaded_sgd.step();
  }
  if (mismatches == 0) {
    // How the messages to the next process of the pipeline travel.
    const int next =
        placement.rank_of((placement.device_of(rank) + 1) % placement.devices, replica);
    std::cout << fmt::format(
        "rank {}: {} steps on {} equal the plain model's, messages {}\n", rank, steps, device.str(),
        distributed::describe_way(distributed::way_to(*group, next, device), next));
  }
  return mismatches == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const pipebal::pipeline::StepTimeout& error) {
    std::cerr << "rank " << std::getenv("RANK") << ": " << error.what() << std::endl;
    std::_Exit(2);  // a layer may still be running: leave without waiting for it
  } catch (const pipebal::distributed::PeerFailed& error) {
    std::cerr << "rank " << std::getenv("RANK") << ": " << error.what() << "\n";
    pipebal::distributed::notify_launcher_of_peer_failure(error.failed_rank());
    return pipebal::distributed::kPeerFailedExitStatus;
  } catch (const std::exception& error) {
    std::cerr << "rank " << std::getenv("RANK") << ": " << pipebal::pipeline::error_summary(error)
              << "\n";
    return 2;
  }
}
