// Summary statistics of timing samples: small pure functions with defined edge cases, used for
// the per-layer median and spread and by the benchmark's repeatability figures.
#pragma once

#include <vector>

namespace pipebal::profiler {

// Every function throws std::invalid_argument for an empty sample; a single sample is its own
// median, mean and every percentile, with a standard deviation of 0.

// The middle value; the mean of the two middle values for an even count (so of 2 samples, their
// mean).
double median(const std::vector<double>& samples);

// The p-th percentile, p in [0, 100], by linear interpolation between the closest ranks
// (NumPy's default): rank = p / 100 * (n - 1). percentile(s, 50) == median(s); with 2 samples
// a and b, percentile(s, 10) == a + 0.1 * (b - a). Throws std::invalid_argument for p outside
// [0, 100].
double percentile(const std::vector<double>& samples, double p);

double mean(const std::vector<double>& samples);

// Sample standard deviation (n - 1 in the denominator); 0 for one sample.
double stddev(const std::vector<double>& samples);

// stddev / mean; 0 when the mean is 0 (all-zero samples vary by nothing).
double coefficient_of_variation(const std::vector<double>& samples);

}  // namespace pipebal::profiler
