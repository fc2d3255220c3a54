// Balancer benchmarks: how long the exact partitioner takes at 1,000 and 10,000 layers, how long
// the planner's search takes (100 layers, 8 devices, every configuration), and how far the
// heuristics' bottleneck is above the exact optimum on random cost vectors.
//   balance_bench --benchmark_out=reports/balance-bench.json --benchmark_out_format=json
#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "pipebal/balance/cost_model.h"
#include "pipebal/balance/dp_partition.h"
#include "pipebal/balance/partition.h"
#include "pipebal/balance/planner.h"

namespace pipebal::balance {
namespace {

enum class Distribution { kUniform, kLogNormal };

// Per-layer costs: forward + backward = c with c drawn from `distribution`; backward is twice
// the forward, as for dense layers. Parameter bytes are drawn independently of time.
std::vector<LayerCost> random_layers(std::mt19937& rng, int n, Distribution distribution) {
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::lognormal_distribution<double> lognormal(0.0, 1.0);
  std::uniform_int_distribution<int64_t> bytes(1 << 10, 1 << 24);
  std::vector<LayerCost> layers(n);
  for (LayerCost& layer : layers) {
    const double c = distribution == Distribution::kUniform ? uniform(rng) : lognormal(rng);
    layer.forward_ms = c / 3;
    layer.backward_ms = 2 * c / 3;
    layer.param_bytes = bytes(rng);
    layer.activation_bytes = bytes(rng);
    layer.output_bytes = bytes(rng) / 16;
  }
  return layers;
}

void BM_DpPartition(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const int k = static_cast<int>(state.range(1));
  const bool constrained = state.range(2) != 0;
  std::mt19937 rng(42);
  const auto layers = random_layers(rng, n, Distribution::kLogNormal);
  CostOptions options;  // gpipe, except_last, 4 micro-batches
  if (constrained) {
    // Memory caps 10% above the tightest feasible one, mixed device speeds, a 10 GB/s link.
    options.device_speeds.resize(k);
    for (int s = 0; s < k; ++s) options.device_speeds[s] = s % 3 == 2 ? 0.5 : 1.0;
    options.bandwidth_bytes_per_ms = 1e7;
    const int64_t tightest = smallest_feasible_memory_cap(CostModel(layers, k, options));
    options.memory_caps_bytes = {tightest + tightest / 10};
  }
  const CostModel model(layers, k, options);
  for (auto _ : state) benchmark::DoNotOptimize(dp_partition(model));
  state.counters["layers"] = n;
  state.counters["stages"] = k;
}
BENCHMARK(BM_DpPartition)
    ->ArgNames({"layers", "stages", "constrained"})
    ->Args({1000, 8, 0})
    ->Args({1000, 64, 0})
    ->Args({10000, 8, 0})
    ->Args({10000, 64, 0})
    ->Args({10000, 64, 1})
    ->Args({20000, 2000, 0})
    ->Unit(benchmark::kMillisecond);

// Statistics of bottleneck / optimum over many random instances (n in [8, 128], k in [2, 8],
// no recomputation so a stage's time is exactly the sum its heuristic balances).
void BM_Quality(benchmark::State& state) {
  const auto algorithm = static_cast<Algorithm>(state.range(0));
  const auto distribution = static_cast<Distribution>(state.range(1));
  constexpr int kInstances = 2000;
  std::vector<double> ratios;
  for (auto _ : state) {
    std::mt19937 rng(7);  // the same instances for every algorithm
    ratios.clear();
    for (int t = 0; t < kInstances; ++t) {
      const int n = 8 + static_cast<int>(rng() % 121);
      const int k = 2 + static_cast<int>(rng() % 7);
      CostOptions options;
      options.checkpoint = pipeline::CheckpointMode::kNever;
      const CostModel model(random_layers(rng, n, distribution), k, options);
      const double optimum = partition(model, Algorithm::kDp).bottleneck_ms;
      ratios.push_back(partition(model, algorithm).bottleneck_ms / optimum);
    }
  }
  std::sort(ratios.begin(), ratios.end());
  double sum = 0;
  int optimal = 0;
  for (double r : ratios) {
    sum += r;
    optimal += r <= 1.0 + 1e-12 ? 1 : 0;
  }
  state.counters["ratio_mean"] = sum / ratios.size();
  state.counters["ratio_median"] = ratios[ratios.size() / 2];
  state.counters["ratio_p90"] = ratios[ratios.size() * 9 / 10];
  state.counters["ratio_max"] = ratios.back();
  state.counters["optimal_share"] = static_cast<double>(optimal) / ratios.size();
  state.SetLabel(to_string(algorithm) +
                 (distribution == Distribution::kUniform ? " uniform(0,1)" : " lognormal(0,1)"));
}
BENCHMARK(BM_Quality)
    ->ArgNames({"algorithm", "costs"})
    ->ArgsProduct(
        {{static_cast<int>(Algorithm::kBlockPartition), static_cast<int>(Algorithm::kUniform),
          static_cast<int>(Algorithm::kParameters)},
         {static_cast<int>(Distribution::kUniform), static_cast<int>(Distribution::kLogNormal)}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// A profile of `n` random layers measured at micro-batch sizes 1, 2, 4, ..., 256 (a mini-batch
// of 256): each layer costs a fixed 0.05 ms per call plus its random per-sample cost.
CostProfile multi_size_profile(int n) {
  std::mt19937 rng(7);
  const std::vector<LayerCost> base = random_layers(rng, n, Distribution::kLogNormal);
  CostProfile profile;
  profile.input_shape = {256, 64};
  profile.batch_size = 256;
  profile.chunks = 1;
  for (int64_t b = 1; b <= 256; b *= 2) {
    SizedCosts sized{b, base};
    for (LayerCost& layer : sized.layers) {
      layer.forward_ms = 0.05 + layer.forward_ms * double(b) / 256;
      layer.backward_ms = 0.1 + layer.backward_ms * double(b) / 256;
      layer.activation_bytes = layer.activation_bytes * b / 256;
      layer.output_bytes = layer.output_bytes * b / 256;
    }
    profile.sizes.push_back(sized);
  }
  profile.layers = profile.sizes.back().layers;
  return profile;
}

void BM_PlanSearch(benchmark::State& state) {
  const CostProfile profile = multi_size_profile(static_cast<int>(state.range(0)));
  PlanSearch search;
  search.devices = static_cast<int>(state.range(1));
  search.data_parallel = state.range(2) != 0;
  search.costs.bandwidth_bytes_per_ms = 1e7;  // 10 GB/s
  int searched = 0;
  for (auto _ : state) searched = search_plans(profile, search).searched;
  state.counters["configurations"] = searched;
}
BENCHMARK(BM_PlanSearch)
    ->ArgNames({"layers", "devices", "data_parallel"})
    ->Args({100, 8, 0})
    ->Args({100, 8, 1})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pipebal::balance

BENCHMARK_MAIN();
