// A plan.json as `pipebal train --plan` reads it.
#include "fuzz/fuzz_support.h"
#include "pipebal/balance/plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto doc = pipebal::fuzz::parse(data, size);
  if (!doc) return 0;
  pipebal::fuzz::refusing_is_fine([&] {
    const pipebal::balance::Plan plan = pipebal::balance::plan_from_json(*doc);
    (void)pipebal::balance::plan_to_json(plan).dump();
  });
  return 0;
}
