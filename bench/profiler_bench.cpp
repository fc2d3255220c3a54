// How much the profiler's numbers can be trusted, on small CPU models of each zoo family:
//   repeatability  per-layer coefficient of variation of the median forward and backward times
//                  over `--profiles` independent profiles of the same model;
//   cost           wall time of one profile;
//   additivity     the sum of per-layer forward+backward medians against a measured whole-model
//                  forward+backward (autograd from the output with a gradient of ones, median).
// Prints one JSON document on stdout; reports/profiler-bench.{json,md} hold a run (by hand).
//
//   profiler_bench [--profiles 5] [--threads 1] [--repeat 10] [--warmup 2] > profiler-bench.json
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <ATen/Parallel.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "pipebal/models/synthetic.h"
#include "pipebal/models/zoo.h"
#include "pipebal/profiler/environment.h"
#include "pipebal/profiler/profiler.h"
#include "pipebal/profiler/statistics.h"
#include "pipebal/workflow/malloc_tuning.h"

namespace {

using pipebal::pipeline::Batch;
namespace profiler = pipebal::profiler;
namespace models = pipebal::models;

struct BenchParams {
  int profiles = 5;
  int threads = 1;
  int repeat = 10;
  int warmup = 2;
};

struct Case {
  std::string spec;
  std::vector<int64_t> shape;
};

// Small enough that the whole run takes a few minutes on two shared cores.
const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"mlp:layers=8,width=256", {32, 256}},
      {"resnet:depth=18,width=16", {8, 3, 32, 32}},
      {"unet:B=2,C=8", {4, 3, 32, 32}},
      {"amoebanetd:L=1,D=16", {4, 3, 32, 32}},
      {"gpt:layers=4,dim=128,heads=4,seq=32,vocab=500", {8, 32}},
  };
  return all;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Whole-model forward + backward on a training-mode clone, median over `repeat` runs. The
// gradients are zeroed between runs, not set to none, so that the backward adds into them as a
// training step's (and the profiler's timed passes) do.
double whole_model_ms(const models::Model& model, const Batch& input, const BenchParams& params) {
  pipebal::pipeline::LayerSeq layers = model.layers.clone();
  layers.train(true);
  std::vector<double> samples;
  for (int r = 0; r < params.warmup + params.repeat; ++r) {
    for (const at::Tensor& p : layers.parameters()) {
      if (p.grad().defined()) at::Tensor(p).mutable_grad().zero_();
    }
    const auto start = std::chrono::steady_clock::now();
    const Batch output = layers.forward(input);
    const at::Tensor out = output.value();
    torch::autograd::backward({out}, {torch::ones_like(out)});
    const double ms = 1e3 * seconds_since(start);
    if (r >= params.warmup) samples.push_back(ms);
  }
  return profiler::median(samples);
}

nlohmann::json run_case(const Case& c, const BenchParams& params) {
  const models::Model model = models::build_model(c.spec, 0);
  const models::SyntheticData data = models::make_synthetic_data(model, c.shape, 0);
  profiler::ProfileOptions options;
  options.warmup = params.warmup;
  options.repeat = params.repeat;

  std::vector<profiler::Profile> profiles;
  std::vector<double> wall_s;
  for (int i = 0; i < params.profiles; ++i) {
    const auto start = std::chrono::steady_clock::now();
    profiles.push_back(profiler::profile_model(model.layers, data.input, options));
    wall_s.push_back(seconds_since(start));
  }

  const size_t layers = profiles.front().layers.size();
  std::vector<double> forward_cv, backward_cv, sums_ms;
  nlohmann::json per_layer = nlohmann::json::array();
  for (size_t l = 0; l < layers; ++l) {
    std::vector<double> fwd, bwd;
    for (const auto& p : profiles) {
      fwd.push_back(p.layers[l].forward_ms);
      bwd.push_back(p.layers[l].backward_ms);
    }
    forward_cv.push_back(profiler::coefficient_of_variation(fwd));
    backward_cv.push_back(profiler::coefficient_of_variation(bwd));
    per_layer.push_back({{"name", profiles.front().layers[l].name},
                         {"forward_ms_median", profiler::median(fwd)},
                         {"backward_ms_median", profiler::median(bwd)},
                         {"forward_cv", forward_cv.back()},
                         {"backward_cv", backward_cv.back()}});
  }
  for (const auto& p : profiles) {
    double sum = 0;
    for (const auto& l : p.layers) sum += l.forward_ms + l.backward_ms;
    sums_ms.push_back(sum);
  }
  const double sum_ms = profiler::median(sums_ms);
  const double whole_ms = whole_model_ms(model, data.input, params);
  return {
      {"model", model.layers.name()},
      {"input_shape", c.shape},
      {"layers", layers},
      {"profile_wall_s_median", profiler::median(wall_s)},
      {"profile_wall_s", wall_s},
      {"forward_cv_median", profiler::median(forward_cv)},
      {"forward_cv_max", *std::max_element(forward_cv.begin(), forward_cv.end())},
      {"backward_cv_median", profiler::median(backward_cv)},
      {"backward_cv_max", *std::max_element(backward_cv.begin(), backward_cv.end())},
      {"sum_of_layers_ms", sum_ms},
      {"whole_model_ms", whole_ms},
      {"sum_over_whole", sum_ms / whole_ms},
      {"per_layer", per_layer},
  };
}

}  // namespace

int main(int argc, char** argv) {
  pipebal::workflow::keep_freed_memory_in_process();
  BenchParams params;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (key == "--profiles")
      params.profiles = value;
    else if (key == "--threads")
      params.threads = value;
    else if (key == "--repeat")
      params.repeat = value;
    else if (key == "--warmup")
      params.warmup = value;
    else {
      std::cerr << "profiler_bench: unknown option " << key << "\n";
      return 2;
    }
  }
  at::set_num_threads(params.threads);
  const auto start = std::chrono::steady_clock::now();
  nlohmann::json results = nlohmann::json::array();
  for (const Case& c : cases()) {
    std::cerr << "profiling " << c.spec << " x" << params.profiles << "\n";
    results.push_back(run_case(c, params));
  }
  const nlohmann::json doc = {
      {"schema", "pipebal.profiler-bench/1"},
      {"environment", profiler::environment_json()},
      {"settings",
       {{"profiles", params.profiles},
        {"threads", params.threads},
        {"repeat", params.repeat},
        {"warmup", params.warmup},
        {"backend", "wallclock"},
        {"device", "cpu"}}},
      {"total_wall_s", seconds_since(start)},
      {"models", results},
  };
  std::cout << doc.dump(2) << "\n";
  return 0;
}
