// Profiling a model at one or several micro-batch sizes: what `pipebal profile --chunks 1,2,4,8`
// and `pipebal validate --auto` run. One profiler::profile_model per size on synthetic data of
// that size; the later sizes start from warm caches and allocator pools, so one warm-up pass
// does for them (and geometric sizes cost at most twice the largest).
//
//   const models::Model model = models::build_model("mlp:layers=8", 0);
//   const profiler::Profile profile = workflow::profile_at_sizes(
//       model, models::default_inputs(model, {64, 512}), {1, 2, 4, 8}, 0, {});
//   profiler::write_profile("profile.json", profile);
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "pipebal/models/input_spec.h"
#include "pipebal/models/synthetic.h"
#include "pipebal/models/zoo.h"
#include "pipebal/profiler/profiler.h"

namespace pipebal::workflow {

// The micro-batch size of each count, ceil(batch / count), checked: every count from 1 to the
// batch, at most 64 counts, no two giving the same size. Throws std::invalid_argument naming
// the count.
std::vector<int64_t> micro_batch_sizes(const std::vector<int>& chunks, int64_t batch);

// Progress of one size's profile.
using SizedProgressFn =
    std::function<void(int64_t micro_batch_size, const profiler::ProfileProgress& progress)>;

// Co-runner threads to profile with at a chunk count (profiler::ProfileOptions::co_runners).
using CoRunnersFn = std::function<int(int chunks)>;

// True when the cost per sample at the two sizes agrees within `tolerance` (0.03: 3%): the cost
// is then linear between them, as the cost model interpolates it.
bool linear_between(int64_t small_size, double small_ms, int64_t large_size, double large_ms,
                    double tolerance);

// Profiles `model` on synthetic data (its loss against the synthetic target) for the mini-batch
// `inputs` (models/synthetic.h's model_inputs) cut into each count of `chunks`; the first count
// is the profile's own (`layers`, `chunks`), and with several counts `sizes` holds every size
// measured, ascending. `co_runners` (empty: options.co_runners for every size) sets the
// co-runners per count. With a `linear_tolerance` above 0 it measures the profile's own size, the
// smallest and the largest, then halves each gap between measured sizes until the whole model's
// cost per sample at its ends is linear_between them; the sizes left inside are not measured
// (`skipped_sizes`): the cost model interpolates there what they would have measured.
profiler::Profile profile_at_sizes(const models::Model& model,
                                   const std::vector<models::InputSpec>& inputs,
                                   const std::vector<int>& chunks, uint64_t seed,
                                   const profiler::ProfileOptions& options,
                                   const CoRunnersFn& co_runners = {},
                                   const SizedProgressFn& progress = {},
                                   double linear_tolerance = 0);

}  // namespace pipebal::workflow
