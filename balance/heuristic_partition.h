// The baselines the exact partitioner is measured against. Each returns layers per stage, no
// stage empty; none looks at memory caps, speeds or transfers.
#pragma once

#include <cstdint>
#include <vector>

namespace pipebal::balance {

// torchgpipe's `balance_by_time` partitioner: the block-partition heuristic of Bárány and
// Grinberg ("Block partitions of sequences", 2015) on `costs` min-max normalised to [0, 1],
// starting from equal layer counts and moving single layers into the smallest block until the
// largest exceeds the smallest by at most 1 (one normalised layer), with torchgpipe's tie rules.
// Where torchgpipe's result is no valid balance (equal-weight blocks, e.g. zero-cost layers, can
// make it cycle, cross its splits or empty a block) the search stops after 16 n k moves, the
// splits are sorted and each empty stage gets a layer from the nearest stage with two or more.
std::vector<int> block_partition(const std::vector<double>& costs, int stages);

// Equal layer counts; the first n % stages stages get one layer more.
std::vector<int> uniform_partition(int layers, int stages);

// The partition whose largest stage weight is smallest (DeepSpeed's `partition_balanced` on
// parameter counts), filling stages greedily from the front at the optimal threshold.
std::vector<int> min_max_partition(const std::vector<int64_t>& weights, int stages);

}  // namespace pipebal::balance
