// See statistics.h.
#include "pipebal/profiler/statistics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace pipebal::profiler {
namespace {

void require_samples(const std::vector<double>& samples, const char* what) {
  if (samples.empty()) {
    throw std::invalid_argument(std::string(what) + " of an empty sample is undefined");
  }
}

}  // namespace

double median(const std::vector<double>& samples) {
  require_samples(samples, "median");
  return percentile(samples, 50.0);
}

double percentile(const std::vector<double>& samples, double p) {
  require_samples(samples, "percentile");
  if (!(p >= 0.0 && p <= 100.0)) {
    throw std::invalid_argument("percentile: p must be in [0, 100], got " + std::to_string(p));
  }
  std::vector<double> sorted = samples;
  std::sort(sorted.begin(), sorted.end());
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(rank));
  const size_t above = std::min(below + 1, sorted.size() - 1);
  const double fraction = rank - static_cast<double>(below);
  return sorted[below] + fraction * (sorted[above] - sorted[below]);
}

double mean(const std::vector<double>& samples) {
  require_samples(samples, "mean");
  return std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
}

double stddev(const std::vector<double>& samples) {
  require_samples(samples, "stddev");
  if (samples.size() == 1) return 0.0;
  const double m = mean(samples);
  double squares = 0.0;
  for (double s : samples) squares += (s - m) * (s - m);
  return std::sqrt(squares / static_cast<double>(samples.size() - 1));
}

double coefficient_of_variation(const std::vector<double>& samples) {
  const double m = mean(samples);
  return m == 0.0 ? 0.0 : stddev(samples) / m;
}

}  // namespace pipebal::profiler
