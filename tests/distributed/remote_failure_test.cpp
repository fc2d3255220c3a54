// The errors from other processes of a run: an echo of a posted failure knows the rank it names.
#include "pipebal/distributed/remote_failure.h"

#include <string>

#include <gtest/gtest.h>

namespace pipebal::distributed {
namespace {

// The rank an echo passes on is the one the posted failure names first, in each way the run's
// processes post one.
TEST(RemoteFailure, AnEchoKnowsTheRankItsFailureNames) {
  EXPECT_EQ(PeerFailed("rank 2 failed: step 3 of 4: boom").failed_rank(), 2);
  EXPECT_EQ(PeerFailed("rank 12's process ended without reporting an error").failed_rank(), 12);
  EXPECT_EQ(PeerFailed("rank 0 has given no sign of life for 10 s").failed_rank(), 0);
  EXPECT_EQ(std::string(PeerFailed("rank 2 failed: boom").what()), "stopped: rank 2 failed: boom");
  for (const char* unnamed :
       {"lost the rendezvous store at 127.0.0.1:1 (has rank 0 ended?)", "rank x failed",
        "rank -1 failed", "rank 99999999999 failed", "rank 3", "ranks 1, 2 failed", ""}) {
    EXPECT_EQ(PeerFailed(unnamed).failed_rank(), -1) << unnamed;
  }
}

}  // namespace
}  // namespace pipebal::distributed
