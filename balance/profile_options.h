// The costs a profile measured besides its layers' — the engine's per-action costs and the link
// `pipebal link` measured between two ranks — put into the options a CostModel plans with, as
// `pipebal balance` and `pipebal plan` put them. A program that plans a profile starts from
// profile_cost_options() so that it predicts what the command line predicts:
//
//   const CostProfile profile = read_profile("profile.json");
//   CostOptions options = profile_cost_options(profile);
//   options.schedule = pipeline::ScheduleKind::kOneFOneB;
//   const CostModel model(layers_for_chunks(profile, options.chunks), 4, options);
#pragma once

#include "pipebal/balance/cost_model.h"
#include "pipebal/balance/layer_cost.h"

namespace pipebal::balance {

// Sets the profile's engine costs, and its measured link as the bandwidth and latency of every
// transfer and of the replicas' all-reduce; what the profile did not measure is left as it is.
void apply_profile_measurements(const CostProfile& profile, CostOptions& options);

// Default options and apply_profile_measurements(), with the micro-batch count the profile is
// planned for (planned_chunks(profile, requested_chunks): its own unless another count of the
// same micro-batch size is requested).
CostOptions profile_cost_options(const CostProfile& profile, int requested_chunks = 0);

}  // namespace pipebal::balance
