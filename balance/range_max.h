// The largest of a fixed sequence's values over any range [first, end) in constant time (a
// sparse table: level j holds the maximum of each run of 2^j values), for queries inside the
// partitioners' loops.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace pipebal::balance {

class RangeMax {
 public:
  RangeMax() = default;
  explicit RangeMax(std::vector<int64_t> values) {
    levels_.push_back(std::move(values));
    for (size_t width = 2; width <= levels_.front().size(); width *= 2) {
      const std::vector<int64_t>& below = levels_.back();
      std::vector<int64_t> level(below.size() - width / 2);
      for (size_t i = 0; i < level.size(); ++i) level[i] = std::max(below[i], below[i + width / 2]);
      levels_.push_back(std::move(level));
    }
  }

  // The maximum over [first, end); first < end <= the sequence's length.
  int64_t max(size_t first, size_t end) const {
    const int j = 63 - __builtin_clzll(static_cast<unsigned long long>(end - first));
    return std::max(levels_[j][first], levels_[j][end - (size_t{1} << j)]);
  }

  bool empty() const { return levels_.empty(); }

 private:
  std::vector<std::vector<int64_t>> levels_;
};

}  // namespace pipebal::balance
