// A profile.json as any tool may write it: read it, then plan it as `pipebal balance` and
// `pipebal plan` do.
#include "fuzz/fuzz_support.h"
#include "pipebal/balance/cost_model.h"
#include "pipebal/balance/micro_batch_costs.h"
#include "pipebal/balance/partition.h"
#include "pipebal/balance/planner.h"
#include "pipebal/balance/profile_reader.h"

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
