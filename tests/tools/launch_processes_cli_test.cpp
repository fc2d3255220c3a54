// What `pipebal launch` gives each of its processes and how it keeps them: torchrun's
// environment, a terminal they run in the background of, and their process groups, which stay
// theirs until the launcher has finished signalling them.
#include <csignal>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "pipebal/common/cores.h"
#include "tests/tools/cli_support.h"

namespace pipebal::testing {
namespace {

// The NAME=value lines of an `env` listing.
std::map<std::string, std::string> variables(const std::string& listing) {
  std::map<std::string, std::string> found;
  std::istringstream lines(listing);
  for (std::string line; std::getline(lines, line);) {
    const size_t equals = line.find('=');
    if (equals != std::string::npos) found[line.substr(0, equals)] = line.substr(equals + 1);
  }
  return found;
}

// The environment each process of `launch_options` is given (the launcher's own without
// OMP_NUM_THREADS, then `assignments`), by local rank.
std::vector<std::map<std::string, std::string>> launched_environments(
    const std::string& launch_options, int processes, const std::string& assignments = "") {
  const std::string dir = scratch_dir();
  const CliResult r =
      run_shell(fmt::format("env -u OMP_NUM_THREADS {} {} launch {} --nproc-per-node {} -- sh -c "
                            "'env > {}/env$LOCAL_RANK'",
                            assignments, PIPEBAL_BINARY, launch_options, processes, dir));
  EXPECT_EQ(r.status, 0) << r.err;
  std::vector<std::map<std::string, std::string>> environments;
  for (int local = 0; local < processes; ++local) {
    environments.push_back(variables(read_text(fmt::format("{}/env{}", dir, local))));
  }
  return environments;
}

// The launcher ignores SIGPIPE and SIGXFSZ for itself (a closed pipe is an error it reports),
// not for the programs it starts: they get the dispositions the launcher found.
TEST(LaunchCli, ProcessesDoNotInheritTheLaunchersIgnoredSignals) {
  const std::string dir = scratch_dir();
  const CliResult r = run_shell(fmt::format(
      "{} launch --nproc-per-node 1 -- sh -c \"awk '/^SigIgn/ {{print \\$2}}' /proc/self/status "
      "> {}/ignored\"",
      PIPEBAL_BINARY, dir));
  ASSERT_EQ(r.status, 0) << r.err;
  const uint64_t ignored = std::stoull(read_text(dir + "/ignored"), nullptr, 16);
  // As this test's process has them (a runner may ignore SIGPIPE itself).
  struct sigaction own {};
  for (const int signal_number : {SIGPIPE, SIGXFSZ}) {
    ASSERT_EQ(::sigaction(signal_number, nullptr, &own), 0);
    EXPECT_EQ((ignored >> (signal_number - 1)) & 1, own.sa_handler == SIG_IGN ? 1u : 0u)
        << "signal " << signal_number << ": " << std::hex << ignored;
  }
  EXPECT_NE(ignored & (uint64_t{1} << (SIGTTIN - 1)), 0u) << "read wrong: " << std::hex << ignored;
}

// Every variable torchrun sets for a worker (but its agent's store), as a program written for
// torchrun reads them; OMP_NUM_THREADS=1 where several processes share the host's cores and it is
// not set, as torchrun.
TEST(LaunchCli, ProcessesGetTorchrunsEnvironment) {
  const auto second_node = launched_environments("--nnodes 2 --node-rank 1 --master-port 29511", 2);
  for (int local = 0; local < 2; ++local) {
    const std::string rank = std::to_string(2 + local);
    const std::map<std::string, std::string> expected = {{"RANK", rank},
                                                         {"WORLD_SIZE", "4"},
                                                         {"LOCAL_RANK", std::to_string(local)},
                                                         {"LOCAL_WORLD_SIZE", "2"},
                                                         {"GROUP_RANK", "1"},
                                                         {"GROUP_WORLD_SIZE", "2"},
                                                         {"ROLE_NAME", "default"},
                                                         {"ROLE_RANK", rank},
                                                         {"ROLE_WORLD_SIZE", "4"},
                                                         {"MASTER_ADDR", "127.0.0.1"},
                                                         {"MASTER_PORT", "29511"},
                                                         {"TORCHELASTIC_RESTART_COUNT", "0"},
                                                         {"TORCHELASTIC_MAX_RESTARTS", "0"},
                                                         {"TORCHELASTIC_RUN_ID", "none"},
                                                         {"OMP_NUM_THREADS", "1"},
                                                         {"PIPEBAL_BIND_CORES", "0"}};
    for (const auto& [name, value] : expected) {
      const auto found = second_node[local].find(name);
      ASSERT_NE(found, second_node[local].end()) << name << " not set for local rank " << local;
      EXPECT_EQ(found->second, value) << name << " of local rank " << local;
    }
  }
  // One that is set is the user's choice; one process alone has the cores to itself.
  EXPECT_EQ(
      launched_environments("--master-port 0", 2, "OMP_NUM_THREADS=3")[0].at("OMP_NUM_THREADS"),
      "3");
  EXPECT_EQ(launched_environments("--master-port 0", 1)[0].count("OMP_NUM_THREADS"), 0u);
  // Pinned to cores of their own (--bind-cores), OpenMP counts each process's cores itself.
  if (pipebal::allowed_cpus().size() >= 2) {
    const auto bound = launched_environments("--master-port 0 --bind-cores", 2);
    for (const auto& environment : bound) {
      EXPECT_EQ(environment.count("OMP_NUM_THREADS"), 0u);
      EXPECT_EQ(environment.at("PIPEBAL_BIND_CORES"), "1");
    }
  }
}

// `script` gives the launcher a terminal of its own, in whose foreground it runs (a shell there
// runs `commands`, written to a file to spare a layer of quoting); the transcript is the output.
CliResult run_on_a_terminal(const std::string& commands) {
  const std::string file = scratch_path("on-terminal.sh");
  std::ofstream(file) << commands << "\n";
  return run_shell(
      fmt::format("timeout -s KILL 60 script -qec 'sh {}' /dev/null </dev/null", file));
}

// The processes run in the terminal's background (process groups of their own, which the
// launcher signals whole). Under `stty tostop` a write there would stop them for good: they
// ignore SIGTTOU and their lines come through. One that reads the terminal gets an error instead
// of stopping (SIGTTIN ignored); one that sets SIGTTIN back and is stopped so is a failure named
// in one line, not a wait for ever.
TEST(LaunchCli, ProcessesUseTheTerminalWithoutStoppingForGood) {
  const CliResult written = run_on_a_terminal(
      fmt::format("stty tostop; {} launch --nproc-per-node 2 --master-port 0 --fold-within 0 -- "
                  "sh -c 'echo written by rank $RANK'",
                  PIPEBAL_BINARY));
  EXPECT_EQ(written.status, 0) << written.out << written.err;
  EXPECT_NE(written.out.find("written by rank 0"), std::string::npos) << written.out;
  EXPECT_NE(written.out.find("written by rank 1"), std::string::npos) << written.out;

  const CliResult read = run_on_a_terminal(fmt::format(
      "{} launch --master-port 0 -- sh -c 'read line; echo \"read: $?\"'", PIPEBAL_BINARY));
  EXPECT_EQ(read.status, 0) << read.out << read.err;
  EXPECT_NE(read.out.find("read: 1"), std::string::npos) << read.out;  // EIO, not a stop

  const CliResult stopped = run_on_a_terminal(fmt::format(
      "{} launch --nproc-per-node 2 --master-port 0 --grace 1 -- python3 -c 'import os, signal, "
      "sys; signal.signal(signal.SIGTTIN, signal.SIG_DFL); sys.stdin.read() if "
      "os.environ[\"RANK\"] == \"0\" else signal.pause()'",
      PIPEBAL_BINARY));
  EXPECT_EQ(stopped.status, 1) << stopped.out << stopped.err;
  EXPECT_NE(stopped.out.find("pipebal launch: rank 0 was stopped for reading the terminal, which "
                             "the processes may not (they run in the background: give the command "
                             "its input from a file); stopping 2 processes"),
            std::string::npos)
      << stopped.out;
}

// A process that has ended stays the launcher's (a zombie, reaped at the end) while the others
// run: its id, which its process group has, cannot go to another process that the launcher's
// signals to the group would then reach.
TEST(LaunchCli, AnEndedProcessKeepsItsGroupsIdUntilTheLaunchEnds) {
  const std::string dir = scratch_dir();
  // Rank 0 leaves its id and ends; rank 1 waits until it has ended, then half a second more (the
  // launcher looks at its processes 50 times a second), and records its state.
  const CliResult r = run_pipebal(fmt::format(
      "launch --nproc-per-node 2 --master-port 0 -- sh -c '"
      "if [ $RANK = 0 ]; then echo $$ > {0}/pid.partial; mv {0}/pid.partial {0}/pid; exit 0; fi; "
      "while [ ! -s {0}/pid ]; do sleep 0.05; done; stat=/proc/$(cat {0}/pid)/stat; "
      "while [ -e $stat ] && [ \"$(cut -d\" \" -f3 $stat)\" != Z ]; do sleep 0.05; done; "
      "sleep 0.5; cut -d\" \" -f3 $stat > {0}/state 2>/dev/null; true'",
      dir));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read_text(dir + "/state"), "Z\n");
}

}  // namespace
}  // namespace pipebal::testing
