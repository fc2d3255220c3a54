// Optimizer names on the command line and in run.json, and back.
#include "pipebal/workflow/optimizer_kind.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace {

using pipebal::workflow::OptimizerKind;

TEST(OptimizerKind, NamesRoundTrip) {
  for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdam}) {
    EXPECT_EQ(pipebal::workflow::parse_optimizer_kind(to_string(kind)), kind);
  }
  EXPECT_EQ(to_string(OptimizerKind::kAdam), "adam");
}

TEST(OptimizerKind, AnUnknownNameListsTheKnownOnes) {
  try {
    pipebal::workflow::parse_optimizer_kind("Adam");
    FAIL() << "parsed";
  } catch (const std::invalid_argument& error) {
    EXPECT_STREQ(error.what(), "unknown optimizer 'Adam' (valid: sgd, adam)");
  }
}

}  // namespace
