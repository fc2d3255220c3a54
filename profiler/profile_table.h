// The console report of a profile: one row per layer and a totals line. A reporter over the
// same Profile struct that profile_json.h writes.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "profiler/profiler.h"

namespace pipebal::profiler {

// Columns: #, layer, type, fwd ms, bwd ms (medians, with the p10-p90 spread), params,
// activations, output; then the totals.
void print_profile_table(const Profile& profile, std::ostream& out);

// "1.5 MiB", "512 B": powers of 1024.
std::string format_bytes(int64_t bytes);

}  // namespace pipebal::profiler
