// profile.json: the `pipebal.profile/1` document. Units are in the key names; the raw samples
// sit beside the medians. balance/profile_reader.h reads it back (only the layer fields it
// needs), so the layer keys index, name, type, forward_ms, backward_ms, param_bytes,
// activation_bytes and output_bytes are a contract.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "pipebal/balance/layer_cost.h"
#include "pipebal/profiler/profiler.h"

namespace pipebal::profiler {

// {"schema": "pipebal.profile/1", "model", "device", "backend", "dtype", "batch_size",
//  "input_shapes", "environment": {...}, "totals": {...}, "layers": [...]}
nlohmann::json profile_to_json(const Profile& profile);

// What the balancer reads of a profile, read the way `pipebal balance` reads profile.json (so a
// program that profiles and balances in one process plans exactly what the CLI would).
balance::CostProfile cost_profile(const Profile& profile);

// Writes profile_to_json(profile) to `path` atomically; throws std::runtime_error naming the
// path when it cannot.
void write_profile(const std::string& path, const Profile& profile);

}  // namespace pipebal::profiler
