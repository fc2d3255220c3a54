// See profiling.h.
#include "pipebal/workflow/profiling.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "pipebal/balance/micro_batch_costs.h"
#include "pipebal/common/machine_load.h"
#include "pipebal/models/synthetic.h"

namespace pipebal::workflow {

std::vector<int64_t> micro_batch_sizes(const std::vector<int>& chunks, int64_t batch) {
  if (chunks.empty()) throw std::invalid_argument("--chunks needs at least one count");
  if (chunks.size() > 64) throw std::invalid_argument("--chunks takes at most 64 counts");
  std::vector<int64_t> sizes;
  for (const int m : chunks) {
    if (m < 1) throw std::invalid_argument(fmt::format("--chunks must be >= 1, got {}", m));
    if (m > batch) {
      throw std::invalid_argument(
          fmt::format("--chunks {} is more than the batch size {} (--input-shape)", m, batch));
    }
    const int64_t size = balance::micro_batch_size(batch, m);
    const auto same = std::find(sizes.begin(), sizes.end(), size);
    if (same != sizes.end()) {
      throw std::invalid_argument(
          fmt::format("--chunks {} and {} both mean micro-batches of {} samples: give one of them",
                      chunks[same - sizes.begin()], m, size));
    }
    sizes.push_back(size);
  }
  return sizes;
}

bool linear_between(int64_t small_size, double small_ms, int64_t large_size, double large_ms,
                    double tolerance) {
  const double small_per_sample = small_ms / static_cast<double>(small_size);
  const double large_per_sample = large_ms / static_cast<double>(large_size);
  return std::abs(large_per_sample - small_per_sample) <= tolerance * small_per_sample;
}

namespace {

// A whole forward and backward at the profile's size.
double total_ms(const profiler::Profile& profile) {
  double ms = 0;
  for (const profiler::LayerProfile& layer : profile.layers)
    ms += layer.forward_ms + layer.backward_ms;
  return ms;
}

}  // namespace

profiler::Profile profile_at_sizes(const models::Model& model,
                                   const std::vector<models::InputSpec>& inputs,
                                   const std::vector<int>& chunks, uint64_t seed,
                                   const profiler::ProfileOptions& options,
                                   const CoRunnersFn& co_runners, const SizedProgressFn& progress,
                                   double linear_tolerance) {
  if (inputs.empty()) throw std::invalid_argument("profile: the model needs an input");
  const std::vector<int64_t>& shape = inputs.front().shape;
  const std::vector<int64_t> sizes = micro_batch_sizes(chunks, shape[0]);
  std::vector<std::optional<profiler::Profile>> profiles(sizes.size());
  int measured = 0;
  const auto measure = [&](size_t k) {
    const models::SyntheticData data =
        models::make_synthetic_data(model, models::with_batch_size(inputs, sizes[k]), seed);
    profiler::ProfileOptions at_size = options;
    if (measured++ > 0) {
      at_size.warmup = std::min(options.warmup, 1);  // caches are warm
      at_size.measure_engine = false;  // the engine's costs do not depend on the size: once
    }
    if (co_runners) at_size.co_runners = co_runners(chunks[k]);
    at_size.loss = models::loss_against(model.info.loss, data.target);
    const int64_t size = sizes[k];
    profiler::ProgressFn report;
    if (progress) report = [&](const profiler::ProfileProgress& p) { progress(size, p); };
    profiles[k] = profiler::profile_model(model.layers, data.input, at_size, report);
  };
  measure(0);  // the profile's own size
  std::vector<size_t> ascending(sizes.size());
  for (size_t k = 0; k < sizes.size(); ++k) ascending[k] = k;
  std::sort(ascending.begin(), ascending.end(),
            [&](size_t a, size_t b) { return sizes[a] < sizes[b]; });
  std::vector<int64_t> skipped;
  if (linear_tolerance <= 0) {
    for (size_t k = 1; k < sizes.size(); ++k) measure(k);
  } else {
    // The smallest and the largest size, then each gap between measured sizes halved until the
    // cost per sample at its two ends agrees: the sizes inside are then interpolated.
    if (!profiles[ascending.front()]) measure(ascending.front());
    if (!profiles[ascending.back()]) measure(ascending.back());
    std::function<void(size_t, size_t)> fill = [&](size_t lo, size_t hi) {
      if (hi - lo < 2) return;
      const size_t a = ascending[lo], b = ascending[hi];
      if (linear_between(sizes[a], total_ms(*profiles[a]), sizes[b], total_ms(*profiles[b]),
                         linear_tolerance)) {
        for (size_t i = lo + 1; i < hi; ++i) skipped.push_back(sizes[ascending[i]]);
        return;
      }
      const size_t mid = (lo + hi) / 2;
      measure(ascending[mid]);
      fill(lo, mid);
      fill(mid, hi);
    };
    size_t lo = 0;
    for (size_t i = 1; i < ascending.size(); ++i) {
      if (!profiles[ascending[i]]) continue;
      fill(lo, i);
      lo = i;
    }
    std::sort(skipped.begin(), skipped.end());
  }
  std::vector<std::optional<MachineLoad>> loads;
  for (const auto& at_size : profiles) {
    if (at_size) loads.push_back(at_size->environment.machine_load);
  }
  profiler::Profile profile = *profiles.front();
  profile.environment.machine_load = combine_loads(loads);
  profile.chunks = chunks.front();
  profile.input_shape = shape;
  profile.skipped_sizes = skipped;
  if (sizes.size() > 1) {
    for (size_t k : ascending) {
      if (profiles[k])
        profile.sizes.push_back({chunks[k], sizes[k], std::move(profiles[k]->layers)});
    }
  }
  return profile;
}

}  // namespace pipebal::workflow
