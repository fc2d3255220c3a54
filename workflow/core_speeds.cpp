// See core_speeds.h.
#include "pipebal/workflow/core_speeds.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

#include "pipebal/profiler/statistics.h"

namespace pipebal::workflow {
namespace {

void check_times(const std::vector<double>& times) {
  if (times.empty() || !std::all_of(times.begin(), times.end(),
                                    [](double t) { return std::isfinite(t) && t > 0; })) {
    throw std::invalid_argument("a block of cores without a positive time");
  }
}

}  // namespace

CoreSpeeds rank_cores(const std::vector<std::vector<int>>& cpus,
                      const std::vector<std::vector<double>>& times_ms) {
  if (cpus.empty() || cpus.size() != times_ms.size()) {
    throw std::invalid_argument(
        fmt::format("times of {} blocks of cores for {} blocks", times_ms.size(), cpus.size()));
  }
  std::vector<double> medians;
  for (const std::vector<double>& times : times_ms) {
    check_times(times);
    medians.push_back(profiler::median(times));
  }
  std::vector<size_t> order(cpus.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return medians[a] < medians[b]; });
  CoreSpeeds ranked;
  for (size_t k : order) {
    ranked.cpus.push_back(cpus[k]);
    ranked.ms.push_back(medians[k]);
    ranked.speeds.push_back(medians[order.front()] / medians[k]);
    ranked.times_ms.push_back(times_ms[k]);
  }
  return ranked;
}

std::vector<double> speeds_round_by_round(const std::vector<std::vector<double>>& times_ms) {
  if (times_ms.empty()) throw std::invalid_argument("no devices' times");
  const std::vector<double>& first = times_ms.front();
  std::vector<double> speeds;
  for (const std::vector<double>& times : times_ms) {
    check_times(times);
    if (times.size() != first.size()) {
      throw std::invalid_argument(
          fmt::format("a device timed in {} rounds, the first in {}", times.size(), first.size()));
    }
    double ratios = 0;
    for (size_t r = 0; r < times.size(); ++r) ratios += times[r] / first[r];
    speeds.push_back(static_cast<double>(times.size()) / ratios);
  }
  return speeds;
}

}  // namespace pipebal::workflow
