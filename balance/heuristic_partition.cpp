// See heuristic_partition.h.
#include "pipebal/balance/heuristic_partition.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>

namespace pipebal::balance {
namespace {

void check_counts(size_t layers, int stages) {
  if (stages < 1 || static_cast<size_t>(stages) > layers) {
    throw std::invalid_argument(
        fmt::format("cannot split {} layers into {} non-empty stages", layers, stages));
  }
}

std::vector<int> sizes_from_splits(const std::vector<int>& splits) {
  std::vector<int> balance(splits.size());
  for (size_t b = 0; b < splits.size(); ++b) balance[b] = splits[b] - (b > 0 ? splits[b - 1] : 0);
  return balance;
}

}  // namespace

std::vector<int> block_partition(const std::vector<double>& costs, int stages) {
  check_counts(costs.size(), stages);
  const int n = static_cast<int>(costs.size());
  const auto [min_it, max_it] = std::minmax_element(costs.begin(), costs.end());
  const double range = *max_it - *min_it;
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i) {
    prefix[i + 1] = prefix[i] + (range > 0 ? (costs[i] - *min_it) / range : 0.0);
  }
  // splits[b] is the end of block b; the heuristic starts from n / stages layers per block and
  // the last block takes the remainder.
  std::vector<int> splits(stages);
  for (int b = 0; b + 1 < stages; ++b) splits[b] = n / stages * (b + 1);
  splits[stages - 1] = n;
  // A block's weight as torchgpipe's slice sum computes it: 0 when its splits have crossed.
  auto size = [&](int b) {
    const int start = b > 0 ? splits[b - 1] : 0;
    return start < splits[b] ? prefix[splits[b]] - prefix[start] : 0.0;
  };

  // torchgpipe's loop can cycle when several blocks weigh the same (e.g. zero-cost layers); the
  // cap ends it there with the partition reached so far.
  const int64_t max_moves = 16 * static_cast<int64_t>(n) * stages + 1000;
  int64_t moves = 0;
  bool done = false;
  while (!done) {
    // (1) p: a largest block (the last one on ties, as torchgpipe's max over (size, index)).
    int p = 0;
    for (int b = 1; b < stages; ++b) {
      if (size(b) >= size(p)) p = b;
    }
    const double largest = size(p);
    while (true) {
      // (2) q: a smallest block (the first one on ties, as torchgpipe's min); stop when the
      // largest exceeds it by at most 1.
      int q = 0;
      for (int b = 1; b < stages; ++b) {
        if (size(b) < size(q)) q = b;
      }
      done = largest <= size(q) + 1 || ++moves > max_moves;
      // (3) Move one layer into q from its neighbour h on p's side. The paper's choice of q
      // (closest to p) keeps h non-empty; torchgpipe's tie rule does not, so splits can cross,
      // which is followed as torchgpipe does, short of leaving [0, n].
      const int h = p < q ? q - 1 : q + 1;
      done = done || (p < q ? splits[h] == 0 : splits[q] == n);
      if (done) break;
      if (p < q) {
        --splits[h];
      } else {
        ++splits[q];
      }
      if (p == h) break;
    }
  }

  // torchgpipe can end with crossed splits or an empty block (and GPipe then rejects the
  // balance); pipebal sorts the splits and moves one layer into each empty stage from the
  // nearest stage that has two or more.
  std::sort(splits.begin(), splits.end());
  std::vector<int> balance = sizes_from_splits(splits);
  for (int b = 0; b < stages; ++b) {
    if (balance[b] > 0) continue;
    int donor = -1;
    for (int d = 0; d < stages; ++d) {
      if (balance[d] >= 2 && (donor < 0 || std::abs(d - b) < std::abs(donor - b))) donor = d;
    }
    --balance[donor];
    ++balance[b];
  }
  return balance;
}

std::vector<int> uniform_partition(int layers, int stages) {
  check_counts(static_cast<size_t>(std::max(layers, 0)), stages);
  std::vector<int> balance(stages, layers / stages);
  for (int s = 0; s < layers % stages; ++s) ++balance[s];
  return balance;
}

std::vector<int> min_max_partition(const std::vector<int64_t>& weights, int stages) {
  check_counts(weights.size(), stages);
  const int n = static_cast<int>(weights.size());
  // Greedy fill at threshold T: close the current stage when the next layer would push it past
  // T, or when the layers left are just enough for one per later stage. Returns {} when T is
  // too small (a layer above T, or more stages than allowed).
  auto fill = [&](int64_t threshold) {
    std::vector<int> balance;
    int64_t load = 0;
    int count = 0;
    for (int i = 0; i < n; ++i) {
      if (weights[i] > threshold) return std::vector<int>{};
      const int later_stages = stages - static_cast<int>(balance.size()) - 1;
      if (count > 0 && (load + weights[i] > threshold || n - i == later_stages)) {
        balance.push_back(count);
        load = 0;
        count = 0;
      }
      load += weights[i];
      ++count;
    }
    balance.push_back(count);
    if (static_cast<int>(balance.size()) != stages) return std::vector<int>{};
    return balance;
  };
  int64_t lo = -1;  // infeasible
  int64_t hi = 0;
  for (int64_t w : weights) hi += w;  // feasible: one stage could hold everything
  std::vector<int> best = fill(hi);
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    std::vector<int> balance = fill(mid);
    if (balance.empty()) {
      lo = mid;
    } else {
      hi = mid;
      best = std::move(balance);
    }
  }
  return best;
}

}  // namespace pipebal::balance
