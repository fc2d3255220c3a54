// A link between two stages as the cost model sees it: a message of b bytes takes
// latency_ms + b / bandwidth_bytes_per_ms one way. Measured by `pipebal link` (ping-pong over the
// run's c10d group) and stored in a profile's "link" field, which `balance` then uses instead
// of --bandwidth. Torch-free.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace pipebal {
class JsonReader;
}

namespace pipebal::balance {

struct LinkSample {
  int64_t bytes = 0;
  double one_way_ms = 0;  // median over the repeats
};

struct LinkModel {
  double latency_ms = 0;
  double bandwidth_bytes_per_ms = 0;
  std::vector<LinkSample> samples;  // what the model was fitted to

  double transfer_ms(int64_t bytes) const {
    return latency_ms + static_cast<double>(bytes) / bandwidth_bytes_per_ms;
  }
};

// Least-squares fit, in relative error, of one_way_ms = latency + bytes / bandwidth (latency
// clamped at 0). Throws
// std::invalid_argument for fewer than two distinct sizes or times that do not grow with size.
LinkModel fit_link(std::vector<LinkSample> samples);

nlohmann::json link_to_json(const LinkModel& link);
// The inverse of link_to_json, at `r` (a profile's "link"). Throws std::invalid_argument naming
// the field that is missing, mistyped or out of range.
LinkModel link_from_json(const JsonReader& r);

}  // namespace pipebal::balance
