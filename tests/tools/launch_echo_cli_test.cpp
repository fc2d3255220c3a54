// `pipebal launch` when ranks stop for another's failure (an echo of it): the launcher names the
// rank that failed, not the echo, and names it among those still running or on another host;
// ranks left running after an echo are stopped after a while.
#include <string>

#include <fmt/format.h>

#include "tests/tools/cli_support.h"

namespace pipebal::testing {
namespace {

// What a rank stopped by `failed`'s failure writes to the launcher (peer_failure_notice.h) before
// it exits with status 3; -1: one that does not say which rank failed.
std::string echo_of(int failed) {
  return fmt::format("echo $RANK{} > /proc/self/fd/${{PIPEBAL_LAUNCH_NOTICE_FD%%:*}}; exit 3",
                     failed >= 0 ? " " + std::to_string(failed) : "");
}

// A rank that stopped because another failed may exit first; launch names the one that failed.
TEST(LaunchCli, LaunchReportsTheRankThatFailedNotTheOneThatFollowed) {
  const CliResult r = run_pipebal(
      fmt::format("launch --nproc-per-node 3 --master-port 0 -- sh -c "
                  "'if [ $RANK = 1 ]; then {}; elif [ $RANK = 2 ]; then sleep 0.5; exit 2; fi'",
                  echo_of(-1)));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("pipebal launch: rank 2 exited with status 2"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("rank 1 exited"), std::string::npos) << r.err;
  // Alone on one host, that status is just the command's: no other host to blame.
  const CliResult alone =
      run_pipebal(fmt::format("launch --master-port 0 -- sh -c '{}'", echo_of(-1)));
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
      echo_of(-1) + "'");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find(" exited with status 3 (stopped by another's failure); rank 1 still "
                       "running 5 s later, the one that failed (stopped, hung, or slow to end): "
                       "stopping it\n"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
}

// An echo that says which rank failed (as pipebal's ranks do) lets the launcher name that one
// among those still running; an echo that does not leaves it to the next that does, and with
// none the one that failed is said to be among them.
TEST(LaunchCli, TheRankAnEchoSaysFailedIsNamedAmongThoseStillRunning) {
  CliResult r = run_pipebal(
      "launch --nproc-per-node 4 --master-port 0 --grace 1 -- sh -c "
      "'if [ $RANK = 1 ]; then kill -STOP $$; elif [ $RANK = 3 ]; then exec sleep 60; fi; " +
      echo_of(1) + "'");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find(" exited with status 3 (stopped by rank 1's failure); ranks 1, 3 still "
                       "running 5 s later, among them rank 1, the one that failed (stopped, hung, "
                       "or slow to end): stopping them\n"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  r = run_pipebal(
      "launch --nproc-per-node 3 --master-port 0 --grace 1 -- sh -c "
      "'if [ $RANK = 0 ]; then " +
      echo_of(-1) + "; elif [ $RANK = 1 ]; then sleep 1; " + echo_of(2) + "; fi; exec sleep 60'");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(r.err,
            "pipebal launch: rank 0 exited with status 3 (stopped by rank 2's failure); rank 2 "
            "still running 5 s later (stopped, hung, or slow to end): stopping it\n");
  r = run_pipebal(
      "launch --nproc-per-node 3 --master-port 0 --grace 1 -- sh -c "
      "'if [ $RANK = 0 ]; then " +
      echo_of(-1) + "; fi; exec sleep 60'");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(r.err,
            "pipebal launch: rank 0 exited with status 3 (stopped by another's failure); ranks 1, "
            "2 still running 5 s later, the one that failed among them (stopped, hung, or slow to "
            "end): stopping them\n");
}

// On a host of several, the rank an echo names is said to be on another host unless it runs
// here, where it is named as the one that failed. (Launchers of node 1 alone, for a world of 4
// or 6: their processes meet no one.)
TEST(LaunchCli, AnEchoNamesTheRankOnAnotherHostOrHere) {
  const std::string node1 =
      "--nnodes 2 --node-rank 1 --master-addr 127.0.0.1 --master-port 29999 --grace 1 -- sh -c ";
  const std::string two = "launch --nproc-per-node 2 " + node1;
  // Every one here stopped by rank 0's failure there.
  CliResult r = run_pipebal(two + "'" + echo_of(0) + "'");
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_NE(
      r.err.find(" exited with status 3 (stopped by the failure of rank 0 on another host)\n"),
      std::string::npos)
      << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  // One here slow to follow: stopped, the echo's status kept (the failure is not here).
  r = run_pipebal(two + "'if [ $RANK = 3 ]; then exec sleep 60; fi; " + echo_of(0) + "'");
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_EQ(r.err,
            "pipebal launch: rank 2 exited with status 3 (stopped by the failure of rank 0 on "
            "another host); 1 process still running 5 s later: stopping it\n");
  // The one that failed here, still running: named, status 1.
  r = run_pipebal("launch --nproc-per-node 3 " + node1 + "'if [ $RANK = 3 ]; then " + echo_of(4) +
                  "; fi; exec sleep 60'");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(r.err,
            "pipebal launch: rank 3 exited with status 3 (stopped by rank 4's failure); ranks 4, 5 "
            "still running 5 s later, among them rank 4, the one that failed (stopped, hung, or "
            "slow to end): stopping them\n");
}

}  // namespace
}  // namespace pipebal::testing
