// Loss names on the command line and in run.json, and back.
#include "pipebal/models/loss_kind.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace {

using pipebal::models::LossKind;

TEST(LossKind, NamesRoundTrip) {
  for (LossKind kind : {LossKind::kCrossEntropy, LossKind::kMse, LossKind::kNll, LossKind::kNone}) {
    EXPECT_EQ(pipebal::models::parse_loss_kind(to_string(kind)), kind);
  }
  EXPECT_EQ(to_string(LossKind::kCrossEntropy), "cross_entropy");
}

TEST(LossKind, AnUnknownNameListsTheKnownOnes) {
  try {
    pipebal::models::parse_loss_kind("hinge");
    FAIL() << "parsed";
  } catch (const std::invalid_argument& error) {
    EXPECT_STREQ(error.what(), "unknown loss 'hinge' (valid: cross_entropy, mse, nll, none)");
  }
}

}  // namespace
