// Engine benchmark (a CLI printing JSON): on this machine's CPU cores, how much the pipeline
// overlaps (chunks = 8 vs chunks = 1, same balance, 2 stages of one thread each), what the
// engine costs over the plain model (1 stage, 1 chunk), and GPipe vs 1F1B. Every comparison
// is a ratio of medians measured in the same run, configurations interleaved.
//
//   engine_bench [--model SPEC] [--input-shape N,...] [--repeats R] > reports/engine-bench.json
#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/Parallel.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "pipebal/models/synthetic.h"
#include "pipebal/models/zoo.h"
#include "pipebal/pipeline/pipeline.h"
#include "pipebal/pipeline/worker.h"
#include "pipebal/profiler/cpu_memory.h"
#include "pipebal/profiler/environment.h"
#include "pipebal/profiler/statistics.h"
#include "pipebal/workflow/malloc_tuning.h"

namespace {

using namespace pipebal;
using Clock = std::chrono::steady_clock;

struct Config {
  std::string name;
  std::vector<int> balance;  // empty: the plain model
  int chunks = 1;
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::kGPipe;
  pipeline::CheckpointMode checkpoint = pipeline::CheckpointMode::kNever;
};

struct Runner {
  models::Model model;
  models::SyntheticData data;
  std::unique_ptr<pipeline::Pipeline> pipeline;
  pipeline::LossFn loss;
  std::unique_ptr<pipeline::Worker> worker;  // runs the plain model off the main thread

  double step_ms() {
    // Zeroed, not dropped: gradient buffers stay allocated between steps, as in training.
    for (auto& p : model.layers.parameters()) {
      if (p.grad().defined()) p.mutable_grad().zero_();
    }
    const auto start = Clock::now();
    if (pipeline) {
      pipeline->step(data.input, data.target, loss);
    } else if (worker) {
      worker->submit([&] { plain_step(); }).get();
    } else {
      plain_step();
    }
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  }
  void plain_step() { loss(model.layers.forward(data.input).value(), data.target).backward(); }
};

}  // namespace

int main(int argc, char** argv) {
  pipebal::workflow::keep_freed_memory_in_process();
  std::string spec = "mlp:layers=8,width=1024";
  std::string shape_text = "256,1024";
  int repeats = 9;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--model") spec = argv[i + 1];
    if (flag == "--input-shape") shape_text = argv[i + 1];
    if (flag == "--repeats") repeats = std::stoi(argv[i + 1]);
  }
  // The plain model runs on the main thread with one intra-op thread, like each stage.
  at::set_num_threads(1);
  const std::vector<int64_t> shape = models::parse_shape(shape_text);
  const int layers = static_cast<int>(models::build_model(spec).layers.size());
  const int half = layers / 2;

  const std::vector<Config> configs = {
      {"plain", {}, 1},
      {"plain, on a worker thread", {}, 1},
      {"1 stage, 1 chunk", {layers}, 1},
      {"2 stages, 1 chunk", {half, layers - half}, 1},
      {"2 stages, 8 chunks, gpipe", {half, layers - half}, 8},
      {"2 stages, 8 chunks, 1f1b", {half, layers - half}, 8, pipeline::ScheduleKind::kOneFOneB},
      {"2 stages, 8 chunks, gpipe, checkpoint always",
       {half, layers - half},
       8,
       pipeline::ScheduleKind::kGPipe,
       pipeline::CheckpointMode::kAlways},
  };
  std::vector<Runner> runners;
  for (const auto& c : configs) {
    Runner r{models::build_model(spec, 0), {}, nullptr, {}, nullptr};
    r.data = models::make_synthetic_data(r.model, shape, 0);
    const models::LossKind kind = r.model.info.loss;
    r.loss = [kind](const at::Tensor& out, const at::Tensor& t) {
      return models::compute_loss(kind, out, t);
    };
    if (c.name == "plain, on a worker thread") {
      r.worker = std::make_unique<pipeline::Worker>([] {
        at::internal::lazy_init_num_threads();
        at::set_num_threads(1);
      });
    }
    if (!c.balance.empty()) {
      pipeline::PipelineOptions options;
      options.on_stage_enter = [](int stage) { profiler::CpuMemoryScope::set_thread_tag(stage); };
      options.chunks = c.chunks;
      options.schedule = c.schedule;
      options.checkpoint = c.checkpoint;
      r.pipeline = std::make_unique<pipeline::Pipeline>(r.model.layers, c.balance,
                                                        std::vector<c10::Device>{}, options);
    }
    runners.push_back(std::move(r));
  }

  // Peak memory first, in a step of its own: counting every allocation has a (small) cost that
  // the timed steps should not pay. Stage workers count under their stage's tag, the plain
  // model (this thread) under tag 0; each figure is the step's peak above what was allocated
  // before it (parameters and gradient buffers).
  std::vector<std::vector<int64_t>> peak_bytes(configs.size());
  {
    profiler::CpuMemoryScope memory;
    profiler::CpuMemoryScope::set_thread_tag(0);
    for (size_t c = 0; c < configs.size(); ++c) {
      runners[c].step_ms();  // warm: the measured step allocates as every later one does
      memory.reset_peak();
      const size_t stages = std::max<size_t>(configs[c].balance.size(), 1);
      std::vector<int64_t> before;
      for (size_t s = 0; s < stages; ++s)
        before.push_back(memory.current_bytes(static_cast<int>(s)));
      runners[c].step_ms();
      // What the step adds at its peak: activations, stashed inputs, recomputation.
      for (size_t s = 0; s < stages; ++s) {
        peak_bytes[c].push_back(memory.peak_bytes(static_cast<int>(s)) - before[s]);
      }
    }
    profiler::CpuMemoryScope::set_thread_tag(-1);
  }

  std::vector<std::vector<double>> samples(configs.size());
  for (auto& r : runners) r.step_ms();  // warm-up, discarded
  for (int rep = 0; rep < repeats; ++rep) {
    for (size_t c = 0; c < configs.size(); ++c) samples[c].push_back(runners[c].step_ms());
  }

  nlohmann::json results = nlohmann::json::array();
  std::map<std::string, double> median;
  for (size_t c = 0; c < configs.size(); ++c) {
    median[configs[c].name] = profiler::median(samples[c]);
    results.push_back({{"config", configs[c].name},
                       {"balance", configs[c].balance},
                       {"chunks", configs[c].chunks},
                       {"median_step_ms", median[configs[c].name]},
                       {"peak_bytes_per_stage", peak_bytes[c]},
                       {"samples_ms", samples[c]}});
  }
  // Ratios of steps run back to back in the same round, then their median: a slow spell of a
  // shared machine falls on both sides of each ratio.
  auto paired = [&](const std::string& numerator, const std::string& denominator) {
    const auto index = [&](const std::string& name) {
      for (size_t c = 0; c < configs.size(); ++c)
        if (configs[c].name == name) return c;
      throw std::logic_error("no configuration " + name);
    };
    const std::vector<double>& a = samples[index(numerator)];
    const std::vector<double>& b = samples[index(denominator)];
    std::vector<double> ratios;
    for (size_t i = 0; i < a.size(); ++i) ratios.push_back(a[i] / b[i]);
    return profiler::median(ratios);
  };
  const double m = 8, n = 2;
  nlohmann::json out = {
      {"schema", "pipebal.bench.engine/1"},
      {"model", spec},
      {"input_shape", shape},
      {"repeats", repeats},
      {"environment", profiler::environment_json()},
      {"results", results},
      {"ratios",
       {{"speedup_chunks8_over_chunks1_gpipe",
         median["2 stages, 1 chunk"] / median["2 stages, 8 chunks, gpipe"]},
        {"speedup_chunks8_over_chunks1_1f1b",
         median["2 stages, 1 chunk"] / median["2 stages, 8 chunks, 1f1b"]},
        {"fill_drain_bound_chunks8", n * m / (m + n - 1)},
        {"engine_efficiency_1stage_vs_plain", median["plain"] / median["1 stage, 1 chunk"]},
        {"paired_speedup_chunks8_over_chunks1_gpipe",
         paired("2 stages, 1 chunk", "2 stages, 8 chunks, gpipe")},
        {"paired_speedup_chunks8_over_chunks1_1f1b",
         paired("2 stages, 1 chunk", "2 stages, 8 chunks, 1f1b")},
        {"paired_engine_efficiency_1stage_vs_plain", paired("plain", "1 stage, 1 chunk")},
        {"paired_worker_thread_vs_plain", paired("plain", "plain, on a worker thread")},
        {"paired_engine_efficiency_1stage_vs_plain_on_worker",
         paired("plain, on a worker thread", "1 stage, 1 chunk")},
        {"gpipe_over_1f1b_step",
         median["2 stages, 8 chunks, gpipe"] / median["2 stages, 8 chunks, 1f1b"]},
        {"checkpoint_always_over_never_step",
         median["2 stages, 8 chunks, gpipe, checkpoint always"] /
             median["2 stages, 8 chunks, gpipe"]}}}};
  std::cout << out.dump(2) << "\n";
  return 0;
}
