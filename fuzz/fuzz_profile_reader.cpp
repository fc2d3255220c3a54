// A profile.json as any tool may write it: read it, then plan it as `pipebal balance` and
// `pipebal plan` do.
#include "balance/cost_model.h"
#include "balance/micro_batch_costs.h"
#include "balance/partition.h"
#include "balance/planner.h"
#include "balance/profile_reader.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto doc = pipebal::fuzz::parse(data, size);
  if (!doc) return 0;
  pipebal::fuzz::refusing_is_fine([&] {
    const pipebal::balance::CostProfile profile = pipebal::balance::profile_from_json(*doc);
    pipebal::balance::CostOptions options;
    options.chunks = pipebal::balance::planned_chunks(profile, 0);
    options.memory_caps_bytes = {int64_t{8} << 30};
    const int stages = static_cast<int>(std::min<size_t>(profile.layers.size(), 3));
    const pipebal::balance::CostModel model(
        pipebal::balance::layers_for_chunks(profile, options.chunks), stages, options);
    for (auto algorithm : pipebal::balance::all_algorithms()) {
      pipebal::fuzz::refusing_is_fine([&] { pipebal::balance::partition(model, algorithm); });
    }
    if (profile.layers.size() <= 64) {
      pipebal::balance::PlanSearch search;
      search.devices = 2;
      search.costs.memory_caps_bytes = {int64_t{8} << 30};
      pipebal::fuzz::refusing_is_fine([&] { pipebal::balance::search_plans(profile, search); });
    }
  });
  return 0;
}
