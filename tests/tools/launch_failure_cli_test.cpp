// `pipebal launch` and its ranks when something goes wrong: bad rendezvous settings, ranks
// started differently, a rank or command that fails, interrupts and suspension, a port in use or
// an unreachable master. Each is one line and a bounded wait; nothing is left running or written.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "tests/support/loopback_port.h"
#include "tests/tools/cli_support.h"
#include "tests/tools/launch_support.h"

namespace pipebal::testing {
namespace {

// Ctrl-C while validate trains a candidate as processes is an interrupt, as in every command
// (status 130, "pipebal: interrupted"), not a failed run; nothing is left behind. The signal
// comes once both ranks train (each with its handler, 3 threads or more).
TEST(LaunchCli, InterruptingValidateAsProcessesIsAnInterrupt) {
  struct sigaction hangup {};
  ASSERT_EQ(::sigaction(SIGHUP, nullptr, &hangup), 0);
  for (const auto& [signal, status, word] :
       {std::tuple<std::string, int, std::string>{"INT", 130, "interrupted"},
        {"HUP", 129, "hung up"}}) {
    if (signal == "HUP" && hangup.sa_handler == SIG_IGN) continue;  // kept ignored, as nohup asks
    const std::string dir = fresh_dir(signal);
    const std::string command =
        kTerminalSignals + std::string(PIPEBAL_BINARY) +
        " validate --model mlp:layers=4,width=64 --input-shape 64,64 --stages 2 --processes 2 "
        "--steps 1000000 --profile-repeat 2 -o " +
        dir + "/v >" + dir + "/out 2>" + dir + "/err & pid=$!; " +
        interrupt_once_training(kChildrenOfPid, 2, signal);
    const int raw = std::system(command.c_str());
    ASSERT_TRUE(WIFEXITED(raw)) << signal;
    EXPECT_EQ(WEXITSTATUS(raw), status) << read_text(dir + "/err");
    EXPECT_EQ(read_text(dir + "/err"),
              "pipebal validate: " + word + "; stopping 2 processes\npipebal: " + word + "\n");
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      const std::string name = entry.path().filename();
      EXPECT_TRUE(name == "out" || name == "err") << signal << ": " << name;
    }
  }
}

// The environment of rank `rank` of `world` with the store on `port`, before `args`.
std::string as_rank(int rank, int world, int port, const std::string& args) {
  return fmt::format(
      "env WORLD_SIZE={} RANK={} MASTER_ADDR=127.0.0.1 MASTER_PORT={} timeout -s KILL 60 {} {}",
      world, rank, port, PIPEBAL_BINARY, args);
}

TEST(LaunchCli, WorldSizeThatIsNotTheStageCountIsOneLine) {
  const CliResult r = run_shell(as_rank(0, 3, 1, kTrain));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(r.err,
            "pipebal: error: rank 0: WORLD_SIZE is 3, but the balance has 2 stages: start one "
            "process per stage\n");
}

// A rank started with other settings would wait for messages that never come (here rank 1
// expects 8 micro-batches of rank 0's 4), or train other weights silently: the ranks compare
// their settings at the rendezvous and stop there, naming the difference; nothing is written.
// Rank 0, which finds the difference, ends a second late: rank 1, stopped by its failure, tells
// the launcher so, which names rank 0 all the same.
TEST(LaunchCli, RanksStartedWithOtherSettingsStopAtTheRendezvousWithOneLine) {
  const std::string dir = scratch_dir() + "/outputs";
  std::filesystem::create_directories(dir);
  const std::string train = kTrain.substr(0, kTrain.find("--chunks"));
  const CliResult r = run_pipebal(
      fmt::format("launch --nproc-per-node 2 --master-port 0 -- sh -c "
                  "'{}{}--chunks $((4 + 4 * RANK)) --timeout 60 -q -o {}/run.json; status=$?; "
                  "if [ $RANK = 0 ]; then sleep 1; fi; exit $status'",
                  PIPEBAL_BINARY, train, dir));
  EXPECT_EQ(r.status, 2) << r.err;
  const std::string line =
      "rank 1's --chunks is 8, rank 0's is 4: every process of a run must be given the same "
      "settings";
  EXPECT_NE(r.err.find("pipebal: error: rank 0: " + line + "\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("pipebal launch: rank 0 exited with status 2"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("the other 0 processes"), std::string::npos) << r.err;  // none to stop
  expect_files(dir, {});

  // The environment switch that frames Gloo's messages too (as on two hosts set up apart).
  const CliResult framed = run_pipebal(
      fmt::format("launch --nproc-per-node 2 --master-port 0 -- sh -c "
                  "'PIPEBAL_SHM_DISABLE=1 PIPEBAL_TENSOR_CHANNEL=$RANK exec {}{} -o {}/run.json'",
                  PIPEBAL_BINARY, kTrain, dir));
  EXPECT_EQ(framed.status, 2) << framed.err;
  EXPECT_NE(framed.err.find("pipebal: error: rank 0: rank 1's PIPEBAL_TENSOR_CHANNEL is 1, rank "
                            "0's is 0: every process of a run must be given the same settings\n"),
            std::string::npos)
      << framed.err;
  expect_files(dir, {});
}

// A parent that ignores SIGCHLD (its children reaped by the kernel) passes that on to what it
// starts: the launcher still waits for its processes and reports the one that failed.
TEST(LaunchCli, AFailedRankIsReportedUnderAParentThatIgnoresChildren) {
  const CliResult r = run_shell(fmt::format(
      "python3 -c 'import os, signal, sys; signal.signal(signal.SIGCHLD, signal.SIG_IGN); "
      "os.execv(sys.argv[1], sys.argv[1:])' {} launch --nproc-per-node 2 --master-port 0 -- "
      "sh -c 'exit $((RANK + 4))'",
      PIPEBAL_BINARY));
  EXPECT_TRUE(r.status == 4 || r.status == 5) << r.status << ": " << r.err;
  EXPECT_NE(r.err.find(fmt::format(" exited with status {}", r.status)), std::string::npos)
      << r.err;
}

// Across hosts (a master address that is not loopback) Gloo opens the interface
// GLOO_SOCKET_IFNAME names: one that this host does not have is one line naming it, from every
// rank, before any connection is tried.
TEST(LaunchCli, AGlooInterfaceThisHostDoesNotHaveIsOneLine) {
  const CliResult r = run_shell(
      fmt::format("ip=$(hostname -I 2>/dev/null | cut -d' ' -f1); [ -n \"$ip\" ] || exit 77; "
                  "GLOO_SOCKET_IFNAME=nosuch0 {0} launch --nproc-per-node 2 --master-addr $ip "
                  "--master-port 0 -- {0} train --model mlp:layers=2,width=8 --input-shape 4,8 "
                  "--balance 2,1 --steps 1 -q --timeout 20",
                  PIPEBAL_BINARY));
  if (r.status == 77) GTEST_SKIP() << "this host has no address but loopback";
  EXPECT_EQ(r.status, 2) << r.err;
  // Each rank's line (one, naming both, where they came close enough together to be folded),
  // then the launcher's.
  std::istringstream lines(r.err);
  std::string line;
  int ranks_lines = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("pipebal launch: ", 0) == 0) continue;
    ++ranks_lines;
    EXPECT_NE(line.find(": cannot open a network device for Gloo (GLOO_SOCKET_IFNAME=nosuch0): "),
              std::string::npos)
        << line;
  }
  EXPECT_GE(ranks_lines, 1) << r.err;
}

// A rank whose layer never returns names itself at its --timeout; the rank waiting for its
// messages waits a moment longer for that report (its own wait may have begun earlier) and
// stops as an echo of it, instead of reporting a failure of its own.
TEST(LaunchCli, ARankWhoseLayerHangsIsNamedByItsOwnTimeout) {
  const CliResult r = run_pipebal(
      "launch --nproc-per-node 2 --master-port 0 -- " PIPEBAL_BINARY
      " train --model " PIPEBAL_FIXTURES_DIR
      "/hang_when_training_scripted.pt --input-shape 4,8 --balance 1,2 --chunks 2 --timeout 5 "
      "--steps 1 --warmup-steps 0 -q");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("rank 1: the step took longer than 5 s (--timeout); still running: stage 1 "
                       "(forward of micro-batch 0)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("pipebal launch: rank 1 exited with status 2"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("nothing within"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("rank 0 exited"), std::string::npos) << r.err;
}

// A failure stops what the other commands started too: a shell's children (or a profiler's
// target) die with it, not outlive the launcher.
TEST(LaunchCli, AFailureStopsWhatTheOtherCommandsStarted) {
  const std::string dir = scratch_dir();
  // Rank 0's shell waits on its child; rank 1's starts one and fails, leaving it behind.
  const CliResult r = run_pipebal(fmt::format(
      "launch --nproc-per-node 2 --master-port 0 --grace 5 -- sh -c "
      "'sleep 60 & echo $! > {0}/pid$RANK.partial; mv {0}/pid$RANK.partial {0}/pid$RANK; "
      "if [ $RANK = 1 ]; then while [ ! -s {0}/pid0 ]; do sleep 0.05; done; exit 1; fi; wait'",
      dir));
  EXPECT_EQ(r.status, 1) << r.err;
  for (const char* rank : {"0", "1"}) {
    const pid_t sleeper = std::stoi(read_text(dir + "/pid" + rank));
    // Killed before the launcher returned; once init has reaped it, no such process.
    int tries = 0;
    while (::kill(sleeper, 0) == 0 && ++tries < 600) usleep(100000);
    EXPECT_NE(::kill(sleeper, 0), 0) << "rank " << rank << "'s child outlived the launcher";
  }
}

// A command this host cannot run is one line, before anything starts.
TEST(LaunchCli, ACommandThatCannotRunIsOneLine) {
  for (const auto& [command, why] : std::vector<std::pair<std::string, std::string>>{
           {"/nonexistent/x", "No such file or directory"},
           {"no-such-cmd", "no such executable on PATH"},
           {"/tmp", "not a regular file"}}) {
    const CliResult r = run_pipebal("launch --nproc-per-node 2 --master-port 0 -- " + command);
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("cannot run '" + command + "': " + why), std::string::npos) << r.err;
  }
}

// Every rank that meets a bad input says so: through the launcher, one line names them all, and
// the launcher's own line comes after it. A line left unfinished is shown whole; lines that
// differ are each shown. (Both ranks print before either exits, or the launcher might stop one
// before it printed; the window is wide for a busy machine.)
TEST(LaunchCli, TheSameLineFromSeveralRanksIsShownOnceNamingThem) {
  const std::string dir = scratch_dir();
  const std::string ranks = fmt::format(
      "launch --nproc-per-node 3 --master-port 0 --fold-within {{}} -- sh -c '"
      "echo \"pipebal: error: rank $RANK: cannot read data.bin\" >&2; "
      "if [ $RANK = 2 ]; then printf \"left unfinished\" >&2; else echo \"rank $RANK alone\" >&2; "
      "fi; touch {0}/printed$RANK; "
      "until [ -e {0}/printed0 ] && [ -e {0}/printed1 ] && [ -e {0}/printed2 ]; do sleep 0.01; "
      "done; exit 2'",
      dir);
  const CliResult r = run_pipebal(fmt::format(ranks, 5));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(r.err.find("pipebal: error: ranks 0-2: cannot read data.bin\n"), 0u) << r.err;
  for (const char* line : {"rank 0 alone\n", "rank 1 alone\n", "left unfinished\n"}) {
    EXPECT_NE(r.err.find(line), std::string::npos) << line << " in " << r.err;
  }
  EXPECT_NE(r.err.find(" exited with status 2; stopping the other 2 processes\n"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(count_lines(r.err), 5) << r.err;

  // Without the window, each rank's line as it printed it.
  for (const char* file : {"printed0", "printed1", "printed2"}) {
    std::filesystem::remove(dir + "/" + std::string(file));
  }
  const CliResult apart = run_pipebal(fmt::format(ranks, 0));
  EXPECT_EQ(apart.status, 2) << apart.err;
  for (int rank : {0, 1, 2}) {
    EXPECT_NE(apart.err.find(fmt::format("pipebal: error: rank {}: cannot read data.bin\n", rank)),
              std::string::npos)
        << apart.err;
  }
}

// The environment's switches are 1 or 0 (or empty): anything else is refused up front, not read
// as one or the other ("false" disabled shared memory), by the commands that need no LibTorch
// too; --help still helps. A RANK that is not a rank names no rank.
TEST(LaunchCli, EnvironmentSwitchesAndRankAreReadStrictly) {
  for (const std::string& assignment :
       {std::string("PIPEBAL_SHM_DISABLE=false"), std::string("PIPEBAL_TENSOR_CHANNEL=true"),
        std::string("PIPEBAL_KEEP_DENORMALS=yes")}) {
    for (const std::string& command : {std::string(kTrain), std::string(" balance p.json")}) {
      const CliResult r = run_shell("env " + assignment + " " + PIPEBAL_BINARY + command);
      EXPECT_EQ(r.status, 2) << assignment << command << ": " << r.err;
      EXPECT_EQ(count_lines(r.err), 1) << r.err;
      const std::string name = assignment.substr(0, assignment.find('='));
      const std::string value = assignment.substr(assignment.find('=') + 1);
      EXPECT_NE(r.err.find(name + " must be 1 (on), or 0 or empty (off), got '" + value + "'"),
                std::string::npos)
          << r.err;
    }
    // Help is given whatever the environment says.
    for (const char* help : {" --help", " train --help", " balance -h"}) {
      const CliResult r = run_shell("env " + assignment + " " + PIPEBAL_BINARY + help);
      EXPECT_EQ(r.status, 0) << assignment << help << ": " << r.err;
      EXPECT_NE(r.out.find("Usage:"), std::string::npos) << r.out;
    }
  }
  // A command that runs as one process is refused to a rank, not run as N copies at once.
  for (const char* command : {" profile --model mlp:layers=2,width=8 --input-shape 4,8 -q",
                              " validate --model mlp:layers=2,width=8 --input-shape 4,8 "
                              "--stages 2 -o v"}) {
    const CliResult rank =
        run_shell(std::string("env WORLD_SIZE=2 RANK=1 ") + PIPEBAL_BINARY + command);
    EXPECT_EQ(rank.status, 2) << command << ": " << rank.err;
    EXPECT_EQ(count_lines(rank.err), 1) << rank.err;
    EXPECT_NE(rank.err.find("pipebal: error: rank 1: "), std::string::npos) << rank.err;
    EXPECT_NE(rank.err.find("runs as one process, not as one of WORLD_SIZE=2 ranks"),
              std::string::npos)
        << rank.err;
  }
  const CliResult r = run_shell(std::string("env WORLD_SIZE=2 RANK=abc MASTER_ADDR=127.0.0.1 "
                                            "MASTER_PORT=1 ") +
                                PIPEBAL_BINARY + kTrain);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(r.err, "pipebal: error: RANK=abc: expected an integer from 0 to 1\n");
  // RANK without WORLD_SIZE: not one process of a world, nor silently the only one.
  const CliResult alone =
      run_shell(std::string("env -u WORLD_SIZE RANK=1 ") + PIPEBAL_BINARY + kTrain);
  EXPECT_EQ(alone.status, 2) << alone.err;
  EXPECT_EQ(count_lines(alone.err), 1) << alone.err;
  EXPECT_EQ(alone.err.rfind("pipebal: error: RANK=1 is set but WORLD_SIZE is not", 0), 0u)
      << alone.err;
  // A rank's mistyped option says whose it is, as its other errors do.
  const CliResult typo = run_shell(std::string("env WORLD_SIZE=2 RANK=1 ") + PIPEBAL_BINARY +
                                   " train --no-such-option");
  EXPECT_EQ(typo.status, 2) << typo.err;
  EXPECT_EQ(typo.err.rfind("pipebal: error: rank 1: ", 0), 0u) << typo.err;
}

// link measures between ranks 0 and 1: a third rank would only wait, so a world of 3 is refused.
TEST(LaunchCli, LinkRefusesAWorldOfMoreThanTwo) {
  const CliResult r = run_pipebal(std::string("launch --nproc-per-node 3 --master-port 0 -- ") +
                                  PIPEBAL_BINARY + " link --timeout 60");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("link measures between two processes, not 3: run it as pipebal launch "
                       "--nproc-per-node 2"),
            std::string::npos)
      << r.err;
}

// link fits a latency and a bandwidth: one message size is refused before the ranks meet.
TEST(LaunchCli, LinkWithOneMessageSizeIsRefusedBeforeMeasuring) {
  const CliResult r = run_pipebal(std::string("launch --nproc-per-node 2 --master-port 0 -- ") +
                                  PIPEBAL_BINARY + " link --sizes 64K --timeout 60");
  EXPECT_EQ(r.status, 2) << r.err;
  // Each rank refuses it; the launcher stops the other once the first has.
  EXPECT_NE(r.err.find(": --sizes: give two different message sizes or more (latency and "
                       "bandwidth are fitted), got 1"),
            std::string::npos)
      << r.err;
}

// A process that ignores the request to stop is killed when Ctrl-C comes again, without waiting
// out --grace; one stopped (SIGSTOP) is woken to act on it. Either would otherwise hold the
// launcher for the whole grace (10 minutes here, past the test's 60 s bound).
TEST(LaunchCli, ASecondInterruptKillsAndAStoppedProcessIsWokenToStop) {
  const std::string dir = scratch_dir();
  const std::string ready = dir + "/ready";
  const CliResult ignoring = run_shell(fmt::format(
      "{{ {}{} launch --nproc-per-node 1 --master-port 0 --grace 600 -- sh -c "
      "'trap \"\" INT TERM; touch {}; while :; do sleep 0.1; done' & pid=$!; "
      "while [ ! -e {} ]; do sleep 0.05; done; sleep 0.2; kill -INT $pid; sleep 1.5; "
      "kill -INT $pid; timeout 60 tail --pid=$pid -f /dev/null; kill -KILL $pid 2>/dev/null; "
      "wait $pid; }}",
      kTerminalSignals, PIPEBAL_BINARY, ready, ready));
  EXPECT_EQ(ignoring.status, 130) << ignoring.err;
  EXPECT_NE(ignoring.err.find("pipebal launch: interrupted; stopping 1 process"), std::string::npos)
      << ignoring.err;

  const CliResult stopped = run_shell(fmt::format(
      "timeout 60 {} launch --nproc-per-node 2 --master-port 0 --grace 600 -- sh -c "
      "'if [ $RANK = 1 ]; then while [ ! -e {} ]; do sleep 0.05; done; sleep 0.2; exit 1; fi; "
      "touch {}; kill -STOP $$; sleep 60'",
      PIPEBAL_BINARY, ready + "2", ready + "2"));
  EXPECT_EQ(stopped.status, 1) << stopped.err;
  EXPECT_NE(stopped.err.find("pipebal launch: rank 1 exited with status 1"), std::string::npos)
      << stopped.err;
}

// A launch a shell without job control started in its background finds SIGINT and SIGQUIT
// ignored and leaves them so, for its processes too (Ctrl-C stops only the foreground); started
// with them at their defaults, it catches them and its processes get them at their defaults.
TEST(LaunchCli, ABackgroundLaunchKeepsSigintIgnoredForItsProcesses) {
  for (const std::string& prefix : {std::string(), std::string(kTerminalSignals)}) {
    const CliResult r = run_shell(fmt::format(
        "{{ {}{} launch --nproc-per-node 1 --master-port 0 -- grep ^SigIgn: /proc/self/status & "
        "wait $!; }}",
        prefix, PIPEBAL_BINARY));
    ASSERT_EQ(r.status, 0) << prefix << r.err;
    ASSERT_EQ(r.out.rfind("SigIgn:", 0), 0u) << r.out;
    const std::string mask = r.out.substr(0, r.out.find('\n'));
    // SIGINT and SIGQUIT (signals 2 and 3: the values 2 and 4 in the last hex digit).
    const int ignored = std::stoi(mask.substr(mask.size() - 1), nullptr, 16) & 6;
    EXPECT_EQ(ignored, prefix.empty() ? 6 : 0) << prefix << mask;
  }
}

// Ctrl-Z stops the processes with the launcher (they run in process groups of their own, which
// the terminal's signal does not reach), and `fg` or `bg` (SIGCONT) wakes them with it.
TEST(LaunchCli, SuspendingTheLauncherStopsAndResumesItsProcesses) {
  const std::string dir = scratch_dir();
  const std::string state = "awk '{print $3}' /proc/$child/stat";
  const CliResult r = run_shell(fmt::format(
      "{{ {3}{0} launch --nproc-per-node 1 --master-port 0 -- sh -c "
      "'echo $$ > {1}/child.partial; mv {1}/child.partial {1}/child; while :; do sleep 0.1; done' "
      "& pid=$!; while [ ! -s {1}/child ]; do sleep 0.05; done; child=$(cat {1}/child); "
      "kill -TSTP $pid; "
      "for i in $(seq 200); do s=$({2}); [ \"$s\" = T ] && break; sleep 0.05; done; "
      "echo \"stopped $s $(awk '{{print $3}}' /proc/$pid/stat)\" > {1}/states; "
      "kill -CONT $pid; "
      "for i in $(seq 200); do s=$({2}); [ \"$s\" != T ] && break; sleep 0.05; done; "
      "echo \"resumed $s\" >> {1}/states; kill -INT $pid; wait $pid; }}",
      PIPEBAL_BINARY, dir, state, kTerminalSignals));
  EXPECT_EQ(r.status, 130) << r.err;
  const std::string states = read_text(dir + "/states");
  EXPECT_EQ(states.substr(0, 12), "stopped T T\n") << states;
  EXPECT_NE(states.find("resumed "), std::string::npos) << states;
  EXPECT_EQ(states.find("resumed T"), std::string::npos) << states;
}

TEST(LaunchCli, PortInUseIsOneLine) {
  const BusyPort busy;
  const CliResult r = run_shell(as_rank(0, 2, busy.port, kTrain));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(fmt::format("rank 0: cannot serve the rendezvous on 127.0.0.1:{} "
                                   "(MASTER_PORT in use?",
                                   busy.port)),
            std::string::npos)
      << r.err;
}

// Rank 0 alone of a world of 3 (the others never started): one line at the timeout, however
// large the world (Gloo's own rendezvous would wait for each missing rank in turn).
TEST(LaunchCli, MissingRanksAreCountedAtTheTimeout) {
  const int port = free_loopback_port();
  std::string train = kTrain.substr(0, kTrain.find("--timeout")) + "--timeout 2 -q";
  train.replace(train.find("--balance 3,2"), 13, "--balance 2,2,1");
  const CliResult r = run_shell(as_rank(0, 3, port, train));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("rank 0: 1 of the 3 processes connected within 2 s (--timeout)"),
            std::string::npos)
      << r.err;
  // Under a second too (TCPStore counts whole seconds: rank 0 once could not reach itself).
  train.replace(train.find("--timeout 2"), 11, "--timeout 0.5");
  const CliResult short_wait = run_shell(as_rank(0, 3, free_loopback_port(), train));
  EXPECT_EQ(short_wait.status, 2) << short_wait.err;
  EXPECT_EQ(short_wait.err,
            "pipebal: error: rank 0: 1 of the 3 processes connected within 0.5 s (--timeout): "
            "were WORLD_SIZE=3 processes started, with this MASTER_ADDR and MASTER_PORT?\n");
}

// Rank 1 waits on rank 0's store for a rank that never comes; rank 0 gives up first and its
// store closes: rank 1 says so, not its broken connection's bare errno.
TEST(LaunchCli, ARankWhoseRendezvousStoreClosesSaysRankZeroGaveUp) {
  const std::string dir = scratch_dir();
  const int port = free_loopback_port();
  std::string train = kTrain.substr(0, kTrain.find("--timeout")) + "--timeout 10 -q";
  train.replace(train.find("--balance 3,2"), 13, "--balance 2,2,1");
  // Rank 1 started first (it waits for the store to come up) and with a longer wait, so that
  // rank 0's ends first, with rank 1 connected however slowly a busy machine starts it.
  std::string longer = train;
  longer.replace(longer.find("--timeout 10"), 12, "--timeout 50");
  const CliResult r = run_shell(
      fmt::format("( ({} 2>{}/rank1.err; echo $? >{}/rank1.status) & {}; s=$?; wait; exit $s )",
                  as_rank(1, 3, port, longer), dir, dir, as_rank(0, 3, port, train)));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("rank 0: 2 of the 3 processes connected within 10 s"), std::string::npos)
      << r.err;
  const std::string rank1 = read_text(dir + "/rank1.err");
  EXPECT_EQ(read_text(dir + "/rank1.status"), "2\n") << rank1;
  EXPECT_EQ(count_lines(rank1), 1) << rank1;
  EXPECT_NE(rank1.find(fmt::format("pipebal: error: rank 1: the rendezvous store on 127.0.0.1:{} "
                                   "(rank 0's) closed while 2 of the 3 processes had connected: "
                                   "rank 0 gave up or failed",
                                   port)),
            std::string::npos)
      << rank1;
}

TEST(LaunchCli, UnreachableMasterIsOneLineAtTheTimeout) {
  const int port = free_loopback_port();
  const std::string train = kTrain;
  const CliResult r =
      run_shell(as_rank(1, 2, port, train.substr(0, train.find("--timeout")) + "--timeout 2 -q"));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(fmt::format("rank 1: cannot reach the rendezvous at 127.0.0.1:{} within 2 s",
                                   port)),
            std::string::npos)
      << r.err;
}

// Something other than a rendezvous store on MASTER_PORT, serving every connection it accepts
// with `serve` (given the connection) until the test is done with it.
class OtherServer {
 public:
  explicit OtherServer(std::function<void(int client)> serve)
      : thread_([this, serve = std::move(serve)] {
          std::vector<int> clients;
          while (!done_) {
            pollfd incoming{port_.fd, POLLIN, 0};
            if (::poll(&incoming, 1, 50) != 1) continue;
            const int client = ::accept(port_.fd, nullptr, nullptr);
            if (client < 0) continue;
            serve(client);
            clients.push_back(client);
          }
          for (const int client : clients) ::close(client);
        }) {}
  ~OtherServer() {
    done_ = true;
    thread_.join();
  }
  int port() const { return port_.port; }

 private:
  const BusyPort port_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// Whether `err` says that what listens on MASTER_PORT may not be the run's store: when the
// meeting reads it (LibTorch 1.13, whose store client connects without a word), or when the
// store client's own check of the server fails (LibTorch 2.x validates and pings it).
bool says_not_a_store(const std::string& err) {
  return err.find("is something other than the run's rank 0 listening there?") !=
             std::string::npos ||
         err.find(
             "(is rank 0 running there, and nothing else? check MASTER_ADDR and "
             "MASTER_PORT)") != std::string::npos;
}

// Rank 1 of 2 against `server`, with --timeout `timeout`.
CliResult rank_one_against(const OtherServer& server, const std::string& timeout) {
  const std::string train = kTrain;
  return run_shell(
      as_rank(1, 2, server.port(),
              train.substr(0, train.find("--timeout")) + "--timeout " + timeout + " -q"));
}

// It answers every connection with bytes no store sends. LibTorch's thread reading the store's
// connection may throw where nothing catches it; the rank still ends with one line, exit 2, not
// std::terminate's abort.
TEST(LaunchCli, AMasterPortAnsweredByAnotherServerIsOneLine) {
  const OtherServer server([](int client) {
    const std::string garbage(4096, '\xff');
    const ssize_t sent = ::send(client, garbage.data(), garbage.size(), MSG_NOSIGNAL);
    (void)sent;
  });
  const CliResult r = rank_one_against(server, "5");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind("pipebal: error: rank 1: ", 0), 0u) << r.err;
}

// Bytes that read as a count of arrivals no run makes: the rank says it met something else (as
// the count, or as the failure of LibTorch's thread reading the other connection, whichever
// reads the bytes first), not that the Gloo connections failed.
TEST(LaunchCli, AMasterPortCountingNonsenseIsNotAStore) {
  const OtherServer server([](int client) {
    const std::string ones(64, '\x01');
    const ssize_t sent = ::send(client, ones.data(), ones.size(), MSG_NOSIGNAL);
    (void)sent;
  });
  const CliResult r = rank_one_against(server, "5");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind("pipebal: error: rank 1: ", 0), 0u) << r.err;
  EXPECT_TRUE(says_not_a_store(r.err)) << r.err;
  EXPECT_EQ(r.err.find("Gloo"), std::string::npos) << r.err;
}

// One that accepts and never answers held the rank for good (c10d's client waits for a reply
// without a limit): the meeting ends 2 x --timeout + 1 s after it began, with one line.
TEST(LaunchCli, AMasterPortThatNeverAnswersEndsTheRankInBoundedTime) {
  const OtherServer server([](int) {});
  const CliResult r = rank_one_against(server, "1");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_TRUE(r.err.find(fmt::format("pipebal: error: rank 1: the rendezvous at 127.0.0.1:{} did "
                                     "not answer within 3 s: is rank 0 stopped or hung, or is "
                                     "something other than the run's rank 0 listening there?",
                                     server.port())) == 0 ||
              says_not_a_store(r.err))
      << r.err;
}

// One that closes every connection at once: the rank says so, not a bare "Broken pipe".
TEST(LaunchCli, AMasterPortThatClosesAtOnceIsNotAStore) {
  const OtherServer server([](int client) { ::shutdown(client, SHUT_RDWR); });
  const CliResult r = rank_one_against(server, "5");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind("pipebal: error: rank 1: ", 0), 0u) << r.err;
  EXPECT_TRUE(says_not_a_store(r.err)) << r.err;
}

}  // namespace
}  // namespace pipebal::testing
