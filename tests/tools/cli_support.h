// Runs the `pipebal` binary as a user would and captures its exit status and output.
#pragma once

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>
#include "tests/support/scratch_dir.h"

namespace pipebal::testing {

struct CliResult {
  int status = -1;
  std::string out;
  std::string err;  // less busy_warnings
  // The warnings that the machine was busy while pipebal measured, or while a profile it reads
  // was measured (common/machine_load.h): whether one comes depends on what else runs beside the
  // test (ctest -j2), so they are kept apart from `err`, whose lines tests compare.
  std::string busy_warnings;
};

// `result` with the busy-machine warnings moved from its err to its busy_warnings.
inline CliResult set_apart_busy_warnings(CliResult result) {
  std::istringstream lines(result.err);
  std::string kept;
  for (std::string line; std::getline(lines, line);) {
    const bool busy = line.rfind("pipebal: warning: ", 0) == 0 &&
                      line.find("the machine was busy") != std::string::npos;
    (busy ? result.busy_warnings : kept) += line + (lines.eof() ? "" : "\n");
  }
  result.err = kept;
  return result;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// stdout and stderr go through files in the test's own scratch directory.
inline CliResult run_executable(const std::string& path, const std::string& args) {
  const std::string out = scratch_path("pipebal.out"), err = scratch_path("pipebal.err");
  const std::string command = path + " " + args + " >" + out + " 2>" + err;
  const int raw = std::system(command.c_str());
  return set_apart_busy_warnings(
      {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, read_text(out), read_text(err), ""});
}

inline CliResult run_pipebal(const std::string& args) {
  return run_executable(PIPEBAL_BINARY, args);
}

// A shell command line, its output captured as run_executable's.
inline CliResult run_shell(const std::string& command) {
  const std::string out = scratch_path("shell.out"), err = scratch_path("shell.err");
  const int raw = std::system((command + " >" + out + " 2>" + err).c_str());
  return set_apart_busy_warnings(
      {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, read_text(out), read_text(err), ""});
}

// A copy of `profile` (written beside it) without the engine's measured costs: on tiny layers
// the engine's cost per action decides whether interleaving or zb-h1 (more actions per device)
// pays, so a check that the planner lists them plans from the layers alone.
inline std::string without_engine_costs(const std::string& profile) {
  const std::string copy = profile + ".layers.json";
  nlohmann::json doc = nlohmann::json::parse(read_text(profile));
  EXPECT_TRUE(doc.contains("engine")) << "no engine costs in " << profile;
  doc.erase("engine");
  std::ofstream(copy) << doc.dump(2);
  return copy;
}

// Starts a command in the tests' shell with SIGINT and SIGQUIT at their defaults, as a command
// typed at a terminal gets them: the shell, without job control, starts a job in its background
// (`... &`) with both ignored, and pipebal keeps signals it finds ignored. (GNU env, coreutils
// 8.31 or later.)
inline constexpr const char* kTerminalSignals = "env --default-signal=INT,QUIT ";

// Shell text, to follow a command started in the background as `... & pid=$!; ` (with
// kTerminalSignals): it waits until `count` of the processes that `pids` (shell text printing
// PIDs) names train — their SIGINT handler installed (SigCgt bit 2) and 3 threads or more — then
// sends $pid SIGINT (or `signal`) a second later, and waits for it. Not ready within 120 s, $pid
// is killed (status 137). Waiting for the run to train,
// not a fixed delay: a slow start (a large CUDA LibTorch to load) would meet the signal before
// main() and test nothing of pipebal.
inline std::string interrupt_once_training(const std::string& pids, int count,
                                           const std::string& signal = "INT") {
  return "ready=; for i in $(seq 1200); do "
         "  n=0; for p in $(" +
         pids +
         "); do "
         "    caught=$(awk '/^SigCgt/ {print substr($2, 16)}' /proc/$p/status 2>/dev/null); "
         "    threads=$(awk '/^Threads/ {print $2}' /proc/$p/status 2>/dev/null); "
         "    case \"$caught\" in [2367abefABEF]) [ \"${threads:-0}\" -ge 3 ] && n=$((n+1));; "
         "esac; "
         "  done; "
         "  [ $n -ge " +
         std::to_string(count) +
         " ] && ready=1 && break; sleep 0.1; "
         "done; "
         "if [ -n \"$ready\" ]; then sleep 1; kill -" +
         signal + " $pid; else kill -KILL $pid; fi; wait $pid";
}

// Shell text printing the PIDs of $pid's children.
inline constexpr const char* kChildrenOfPid =
    "grep -l \"^PPid:[[:space:]]*$pid$\" /proc/[0-9]*/status 2>/dev/null | cut -d/ -f3";

inline int count_lines(const std::string& text) {
  int lines = 0;
  for (char c : text) lines += c == '\n';
  return lines;
}

}  // namespace pipebal::testing
