// See profiling.h.
#include "workflow/profiling.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "balance/micro_batch_costs.h"
#include "models/synthetic.h"

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

profiler::Profile profile_at_sizes(const models::Model& model,
                                   const std::vector<models::InputSpec>& inputs,
                                   const std::vector<int>& chunks, uint64_t seed,
                                   const profiler::ProfileOptions& options,
                                   const CoRunnersFn& co_runners, const SizedProgressFn& progress) {
  if (inputs.empty()) throw std::invalid_argument("profile: the model needs an input");
  const std::vector<int64_t>& shape = inputs.front().shape;
  const std::vector<int64_t> sizes = micro_batch_sizes(chunks, shape[0]);
  std::vector<profiler::Profile> profiles;
  for (size_t k = 0; k < sizes.size(); ++k) {
    const models::SyntheticData data =
        models::make_synthetic_data(model, models::with_batch_size(inputs, sizes[k]), seed);
    profiler::ProfileOptions at_size = options;
    if (k > 0) at_size.warmup = std::min(options.warmup, 1);
    if (co_runners) at_size.co_runners = co_runners(chunks[k]);
    at_size.loss = models::loss_against(model.info.loss, data.target);
    const int64_t size = sizes[k];
    profiler::ProgressFn report;
    if (progress) report = [&](const profiler::ProfileProgress& p) { progress(size, p); };
    profiles.push_back(profiler::profile_model(model.layers, data.input, at_size, report));
  }
  profiler::Profile profile = profiles.front();
  profile.chunks = chunks.front();
  profile.input_shape = shape;
  if (profiles.size() > 1) {
    for (size_t k = 0; k < profiles.size(); ++k) {
      profile.sizes.push_back({chunks[k], sizes[k], std::move(profiles[k].layers)});
    }
    std::sort(profile.sizes.begin(), profile.sizes.end(),
              [](const auto& a, const auto& b) { return a.micro_batch_size < b.micro_batch_size; });
  }
  return profile;
}

}  // namespace pipebal::workflow
