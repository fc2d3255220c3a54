// Reading a cost profile from JSON: a `pipebal.profile/1` document, or any object whose
// `layers[]` carry forward_ms, backward_ms, param_bytes, activation_bytes and output_bytes, so a
// profile written by hand or by another tool works too.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "pipebal/balance/layer_cost.h"

namespace pipebal::balance {

// Converts a parsed document. "schema" is optional, but when present it must be
// pipebal.profile/1; "name" and "type" are optional strings. Throws std::invalid_argument
// "FILE: layers[3].forward_ms ..." for a field that is missing, of the wrong type, not finite or
// negative (common/json_reader.h).
CostProfile profile_from_json(const nlohmann::json& doc, const std::string& file = "profile");

// Reads and converts the file at `path`; errors are prefixed with the path.
CostProfile read_profile(const std::string& path);

}  // namespace pipebal::balance
