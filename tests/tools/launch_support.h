// Shared by the multi-process CLI tests: a small two-stage run, and what a run leaves behind.
#pragma once

#include <filesystem>
#include <set>
#include <string>

#include <gtest/gtest.h>

namespace pipebal::testing {

// Two stages of a small MLP, 4 micro-batches, 3 steps: quick enough for several processes.
inline const std::string kTrain =
    " train --model mlp:layers=4,width=32 --input-shape 16,32 --balance 3,2 --chunks 4 "
    "--schedule 1f1b --steps 3 --warmup-steps 1 --timeout 60 -q";

// A run's outputs in `dir` are exactly `expected` (rank 1 wrote nothing of its own).
inline void expect_files(const std::string& dir, std::set<std::string> expected) {
  std::set<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    found.insert(entry.path().filename());
  }
  EXPECT_EQ(found, expected);
}

}  // namespace pipebal::testing
