// The console report of a profile: one row per layer and a totals line. A reporter over the
// same Profile struct that profile_json.h writes.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "pipebal/common/format_bytes.h"

#include "pipebal/profiler/profiler.h"

namespace pipebal::profiler {

// Columns: #, layer, type, fwd ms, bwd ms (medians, with the p10-p90 spread), params,
// activations, output; then the totals.
void print_profile_table(const Profile& profile, std::ostream& out);

}  // namespace pipebal::profiler
