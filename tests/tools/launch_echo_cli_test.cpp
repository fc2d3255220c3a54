// `pipebal launch` when ranks stop for another's failure (an echo of it): the launcher names the
// rank that failed, not the echo, and names it among those still running or on another host;
// ranks left running after an echo are stopped after a while.
#include <string>

#include <fmt/format.h>

#include "tests/tools/cli_support.h"

namespace pipebal::testing {
namespace {

// What a pipebal rank stopped by another's failure does (distributed/peer_failure_notice.h): it
// tells the launcher so, and exits with status 3.
constexpr const char* kStopForAnothersFailure =
    "echo $RANK > /proc/self/fd/${PIPEBAL_LAUNCH_NOTICE_FD%%:*}; exit 3";

// A rank that stopped because another failed may exit first; launch names the one that failed.
TEST(LaunchCli, LaunchReportsTheRankThatFailedNotTheOneThatFollowed) {
  const CliResult r = run_pipebal(
      fmt::format("launch --nproc-per-node 3 --master-port 0 -- sh -c "
                  "'if [ $RANK = 1 ]; then {}; elif [ $RANK = 2 ]; then sleep 0.5; exit 2; fi'",
                  kStopForAnothersFailure));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("pipebal launch: rank 2 exited with status 2"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("rank 1 exited"), std::string::npos) << r.err;
  // Alone on one host, that status is just the command's: no other host to blame.
  const CliResult alone =
      run_pipebal(fmt::format("launch --master-port 0 -- sh -c '{}'", kStopForAnothersFailure));
  EXPECT_EQ(alone.status, 3) << alone.err;
  EXPECT_EQ(alone.err, "pipebal launch: rank 0 exited with status 3\n");
}

// Status 3 from a command that did not say it stopped for another's failure is its own failure:
// the first, reported at once (not after the others were given time to end by themselves).
TEST(LaunchCli, AStatusThreeOfTheCommandsOwnIsAFailure) {
  const CliResult r = run_pipebal(
      "launch --nproc-per-node 3 --master-port 0 --grace 1 -- sh -c "
      "'if [ $RANK = 1 ]; then exit 3; fi; sleep 60'");
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_EQ(r.err, "pipebal launch: rank 1 exited with status 3; stopping the other 2 processes\n");
}

// The rank that failed may give no sign of life (stopped, its host gone): once one was stopped
// by another's failure, the rest get a few seconds to end by themselves, then are stopped.
// On one host the rank still running is the one that failed: it is named, and the launch
// fails with status 1 (not the echo's 3).
TEST(LaunchCli, RanksLeftAfterOneStoppedByAFailureAreStoppedAfterAWhile) {
  const CliResult r = run_pipebal(
      "launch --nproc-per-node 3 --master-port 0 --grace 1 -- sh -c "
      "'if [ $RANK = 1 ]; then kill -STOP $$; fi; " +
      std::string(kStopForAnothersFailure) + "'");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find(" exited with status 3 (stopped by another's failure); rank 1 still "
                       "running 5 s later, the one that failed (stopped, hung, or slow to end): "
                       "stopping it\n"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
}

// An echo that says which rank failed (as pipebal's ranks do) lets the launcher name that one
// among those still running.
TEST(LaunchCli, TheRankAnEchoSaysFailedIsNamedAmongThoseStillRunning) {
  const CliResult r = run_pipebal(
      "launch --nproc-per-node 4 --master-port 0 --grace 1 -- sh -c "
      "'if [ $RANK = 1 ]; then kill -STOP $$; elif [ $RANK = 3 ]; then exec sleep 60; fi; "
      "echo $RANK 1 > /proc/self/fd/${PIPEBAL_LAUNCH_NOTICE_FD%%:*}; exit 3'");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find(" exited with status 3 (stopped by rank 1's failure); ranks 1, 3 still "
                       "running 5 s later, rank 1 the one that failed (stopped, hung, or slow to "
                       "end): stopping them\n"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
}

// On a host of several, the rank an echo names is said to be on another host unless it runs
// here, where it is named as the one that failed. (The launcher of node 1 alone: its processes
// meet no one.)
TEST(LaunchCli, AnEchoNamesTheRankOnAnotherHostOrHere) {
  const std::string node1 =
      "launch --nproc-per-node 2 --nnodes 2 --node-rank 1 --master-addr 127.0.0.1 "
      "--master-port 29999 --grace 1 -- sh -c ";
  const std::string echo =
      "echo $RANK {} > /proc/self/fd/${{PIPEBAL_LAUNCH_NOTICE_FD%%:*}}; exit 3";
  CliResult r = run_pipebal(node1 + "'" + fmt::format(echo, 0) + "'");
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_NE(r.err.find(" exited with status 3 (stopped because rank 0 on another host failed)\n"),
            std::string::npos)
      << r.err;
  r = run_pipebal(node1 + "'if [ $RANK = 3 ]; then exec sleep 60; fi; " + fmt::format(echo, 3) +
                  "'");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(r.err,
            "pipebal launch: rank 2 exited with status 3 (stopped by rank 3's failure); rank 3 "
            "still running 5 s later (stopped, hung, or slow to end): stopping it\n");
}

}  // namespace
}  // namespace pipebal::testing
